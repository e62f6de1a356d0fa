//! Unpacking an execution environment into the model's private tree, written so that nothing
//! lands outside it whatever the archive holds ([`unpack`]).

use std::collections::BTreeSet;
use std::io::Read as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{LinkKind, MAX_MEMBERS, MODEL_DIRECTORY, Member, check_members, normalized};

/// The most bytes one environment unpacks to: a conda-packed environment with a deep-learning
/// framework is a few GiB; a small archive that would fill the staging folder is refused.
pub const MAX_UNPACKED_BYTES: u64 = 16 << 30;

/// The folder, in the model's folder of its private tree, an environment is unpacked into.
pub const UNPACKED: &str = ".trident-environment";

/// Why an environment was not unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnpackError {
    /// The archive is refused (what it holds, for the client's 400).
    Refused(String),
    /// Writing failed (the staging folder's file system).
    Failed(String),
}

/// Points `config`'s `EXECUTION_ENV_PATH` at the folder [`unpack`] makes in the model's folder;
/// returns whether it had one.
pub fn point_at_unpacked(config: &mut crate::artifacts::text_format::Message) -> bool {
    use crate::artifacts::text_format::Value;
    let mut pointed = false;
    for parameter in config.messages_mut("parameters") {
        if parameter.text("key") != Some("EXECUTION_ENV_PATH") {
            continue;
        }
        if let Some(value) = parameter.message_mut("value") {
            value.set(
                "string_value",
                Value::Text(format!("{MODEL_DIRECTORY}/{UNPACKED}")),
            );
            pointed = true;
        }
    }
    pointed
}

/// Unpacks the environment at `path` into `folder` (made here): folders, regular files
/// (permission bits of 0o755 at most: no set-id), symbolic links and hard links to files
/// already unpacked; nothing is written through a link or over another member, no device or
/// FIFO is made, and no more than [`MAX_UNPACKED_BYTES`] are written. What was written is
/// then checked as a whole by [`super::check_archive`]'s rules (a link is known safe only once
/// every link is known, and the archive may have changed since it was checked); on any error
/// the folder is removed.
pub fn unpack(path: &Path, folder: &Path) -> Result<(), UnpackError> {
    unpack_within(path, folder, MAX_UNPACKED_BYTES)
}

/// [`unpack`] with a bound of `max_bytes`.
fn unpack_within(path: &Path, folder: &Path, max_bytes: u64) -> Result<(), UnpackError> {
    let mut unpacker = Unpacker {
        folder,
        max_bytes,
        written: 0,
        links: BTreeSet::new(),
        members: Vec::new(),
    };
    let checked = unpacker
        .run(path)
        .and_then(|()| check_members(&unpacker.members).map_err(UnpackError::Refused));
    if checked.is_err() && folder.exists() {
        drop(std::fs::remove_dir_all(folder));
    }
    checked
}

fn refused(what: String) -> UnpackError {
    UnpackError::Refused(what)
}

fn failed(what: &Path, e: &std::io::Error) -> UnpackError {
    UnpackError::Failed(format!("cannot unpack into {}: {e}", what.display()))
}

/// A member made where one already is would overwrite it: the archive is refused.
fn made(inside: &Path, target: &Path, e: &std::io::Error) -> UnpackError {
    match e.kind() {
        std::io::ErrorKind::AlreadyExists => refused(format!(
            "has member {} more than once (a later one would overwrite)",
            inside.display()
        )),
        _ => failed(target, e),
    }
}

/// One unpacking: where, its bound, and what it wrote so far.
struct Unpacker<'a> {
    folder: &'a Path,
    max_bytes: u64,
    written: u64,
    /// The symbolic links made, by their path inside the folder.
    links: BTreeSet<PathBuf>,
    /// Every member written.
    members: Vec<Member>,
}

impl Unpacker<'_> {
    fn run(&mut self, path: &Path) -> Result<(), UnpackError> {
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(self.folder)
            .map_err(|e| failed(self.folder, &e))?;
        let file =
            std::fs::File::open(path).map_err(|e| refused(format!("cannot be read: {e}")))?;
        let mut archive = tar::Archive::new(flate2::read::MultiGzDecoder::new(file));
        archive.set_ignore_zeros(true);
        let entries = archive
            .entries()
            .map_err(|e| refused(format!("is not a .tar.gz archive: {e}")))?;
        for (index, entry) in entries.enumerate() {
            if index == MAX_MEMBERS {
                return Err(refused(format!("holds more than {MAX_MEMBERS} members")));
            }
            let entry = entry.map_err(|e| refused(format!("is not a .tar.gz archive: {e}")))?;
            self.member(entry)?;
        }
        Ok(())
    }

    /// Writes one member.
    fn member<R: std::io::Read>(
        &mut self,
        mut entry: tar::Entry<'_, R>,
    ) -> Result<(), UnpackError> {
        let name = entry
            .path()
            .map_err(|e| refused(format!("has a member whose name cannot be read: {e}")))?
            .into_owned();
        let inside = normalized(Path::new(""), &name).ok_or_else(|| {
            refused(format!(
                "has member {} whose path leaves the folder it is unpacked in",
                name.display()
            ))
        })?;
        if inside.as_os_str().is_empty() {
            return Ok(());
        }
        if self.through_link(&inside) {
            return Err(refused(format!(
                "has member {} that would be written through a link",
                inside.display()
            )));
        }
        let target = self.folder.join(&inside);
        if let Some(parent) = target.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(parent)
                .map_err(|e| failed(parent, &e))?;
        }
        let mode = entry.header().mode().unwrap_or(0o644) & 0o755;
        let kind = entry.header().entry_type();
        let (kind, target_of_link) = if kind.is_dir() {
            match std::fs::DirBuilder::new()
                .mode(mode | 0o700)
                .create(&target)
            {
                Err(e)
                    if !(e.kind() == std::io::ErrorKind::AlreadyExists
                        && std::fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir())) =>
                {
                    return Err(failed(&target, &e));
                }
                _ => (LinkKind::None, None),
            }
        } else if kind.is_file() || kind == tar::EntryType::Continuous {
            self.file(&mut entry, &inside, &target, mode)?;
            (LinkKind::None, None)
        } else if kind.is_symlink() || kind.is_hard_link() {
            let Ok(Some(link)) = entry.link_name() else {
                return Err(refused(format!(
                    "has link {} with no target",
                    inside.display()
                )));
            };
            let link = link.into_owned();
            if kind.is_symlink() {
                std::os::unix::fs::symlink(&link, &target)
                    .map_err(|e| made(&inside, &target, &e))?;
                self.links.insert(inside.clone());
                (LinkKind::Symbolic, Some(link))
            } else {
                self.hard_link(&inside, &target, &link)?;
                (LinkKind::Hard, Some(link))
            }
        } else {
            return Err(refused(format!(
                "has member {} of a kind an environment does not hold ({kind:?})",
                inside.display()
            )));
        };
        self.members.push(Member {
            path: inside,
            kind,
            target: target_of_link,
        });
        Ok(())
    }

    /// Whether a folder above `inside` is one of the links made.
    fn through_link(&self, inside: &Path) -> bool {
        inside.ancestors().skip(1).any(|a| self.links.contains(a))
    }

    /// Writes a regular file, within the bound.
    fn file(
        &mut self,
        entry: &mut impl std::io::Read,
        inside: &Path,
        target: &Path,
        mode: u32,
    ) -> Result<(), UnpackError> {
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode | 0o400)
            .custom_flags(libc::O_NOFOLLOW)
            .open(target)
            .map_err(|e| made(inside, target, &e))?;
        let room = self.max_bytes.saturating_sub(self.written);
        let copied =
            std::io::copy(&mut entry.take(room + 1), &mut out).map_err(|e| failed(target, &e))?;
        self.written += copied;
        if copied > room {
            return Err(refused(format!(
                "unpacks to more than {} bytes",
                self.max_bytes
            )));
        }
        Ok(())
    }

    /// A hard link names a file unpacked before it, from the archive's top.
    fn hard_link(&self, inside: &Path, target: &Path, link: &Path) -> Result<(), UnpackError> {
        let source = normalized(Path::new(""), link)
            .filter(|s| !self.through_link(s))
            .map(|s| self.folder.join(s))
            .filter(|s| std::fs::symlink_metadata(s).is_ok_and(|m| m.is_file()))
            .ok_or_else(|| {
                refused(format!(
                    "has hard link {} to {}, which is no file unpacked before it",
                    inside.display(),
                    link.display()
                ))
            })?;
        std::fs::hard_link(&source, target).map_err(|e| made(inside, target, &e))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::archive;
    use super::*;

    #[test]
    fn a_checked_environment_unpacks_as_its_members_say() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let ok = archive(&[
            ("bin/activate", None, false),
            ("lib/python3.11/site.py", None, false),
            ("bin/python", Some("python3.11"), false),
            ("lib/copy", Some("lib/python3.11/site.py"), true),
            ("./share/./x/../y", None, false),
        ]);
        let folder = tempfile::tempdir().unwrap();
        let into = folder.path().join(UNPACKED);
        assert_eq!(unpack(ok.path(), &into), Ok(()));
        let activate = std::fs::metadata(into.join("bin/activate")).unwrap();
        assert_eq!(std::fs::read(into.join("bin/activate")).unwrap(), b"x\n");
        assert_eq!(activate.permissions().mode() & 0o7777, 0o755);
        assert_eq!(
            std::fs::read_link(into.join("bin/python")).unwrap(),
            Path::new("python3.11")
        );
        let ino = |p: &str| std::fs::metadata(into.join(p)).unwrap().ino();
        assert_eq!(ino("lib/copy"), ino("lib/python3.11/site.py"));
        assert!(into.join("share/y").is_file());
    }

    #[test]
    fn set_id_bits_are_dropped_and_nothing_is_overwritten() {
        use std::os::unix::fs::PermissionsExt;
        let file = tempfile::NamedTempFile::new().unwrap();
        let encoder =
            flate2::write::GzEncoder::new(file.reopen().unwrap(), flate2::Compression::fast());
        let mut builder = tar::Builder::new(encoder);
        for mode in [0o6777, 0o644] {
            let mut header = tar::Header::new_gnu();
            header.set_path("bin/tool").unwrap();
            header.set_mode(mode);
            header.set_size(1);
            header.set_cksum();
            builder.append(&header, &b"x"[..]).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap();
        let folder = tempfile::tempdir().unwrap();
        let into = folder.path().join("env");
        // The second `bin/tool` would overwrite the first: refused, and nothing is left.
        let twice = unpack(file.path(), &into).unwrap_err();
        assert!(
            matches!(&twice, UnpackError::Refused(what) if what.contains("bin/tool more than once")),
            "{twice:?}"
        );
        assert!(!into.exists());
        let single = archive(&[("bin/tool", None, false)]);
        unpack(single.path(), &into).unwrap();
        let mode = std::fs::metadata(into.join("bin/tool"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7000, 0);
    }

    #[test]
    fn an_environment_that_escapes_or_grows_past_its_bound_is_not_left_unpacked() {
        // t -> s/.. first, then s -> ..: t looked inside while s was no link yet.
        let chain = archive(&[("d/t", Some("s/.."), false), ("d/s", Some(".."), false)]);
        let folder = tempfile::tempdir().unwrap();
        let into = folder.path().join("env");
        let refused = unpack(chain.path(), &into).unwrap_err();
        assert!(
            matches!(&refused, UnpackError::Refused(what) if what.contains("d/t")),
            "{refused:?}"
        );
        assert!(!into.exists());
        let big = archive(&[("a", None, false), ("b", None, false)]);
        let refused = unpack_within(big.path(), &into, 3).unwrap_err();
        assert_eq!(
            refused,
            UnpackError::Refused("unpacks to more than 3 bytes".to_owned())
        );
        assert!(!into.exists());
    }
}

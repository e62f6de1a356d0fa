//! The private trees the core loads artifacts from, so that it reads what trident checked.
//!
//! Each process keeps its trees in a folder of its own, `trident-artifacts-<pid>` under the
//! staging folder (`TRIDENT_ARTIFACT_STAGING_DIR`, by default the temporary folder), made
//! `0700`. A tree is one of two shapes:
//! - [`Shape::Private`] (under a gate): every folder made anew, every file hard-linked from
//!   the artifact (the same bytes: nothing to copy) or, where a hard link cannot be made
//!   (another file system, a file the process may not link), copied. Links that stay inside
//!   the artifact are made again inside the tree; a link out of it is kept as such, for the
//!   check to refuse. A FIFO, socket or device refuses the artifact, naming it: left out, a
//!   `plugins.toml` that is a FIFO made a model load without the plugins its tenant sent
//!   (an artifact holds files, folders and links; nothing else is understood). The check then reads the tree,
//!   trident writes each model's configuration over it (a new file: a hard-linked original is
//!   never written through), and its folders are made read-only. What the core reads is what
//!   was checked, whatever happens to the artifact's folder meanwhile (a hard-linked file
//!   shares its bytes with the original: a process that rewrites the original in place
//!   changes it; nothing in the container does).
//! - [`Shape::Linked`] (no gate, a configuration to change): the model folders whose
//!   configuration trident rewrites are made anew, with a link to each of their other
//!   entries; every other entry of the repository is a link. Nothing is copied.
//!
//! A tree is removed when its [`Staged`] is dropped (the model unloaded, the load failed), on a
//! thread of its own; the trees of a process that died are removed by the next one to start.
//!
//! A multi-model load's tree is made at one path per model name ([`StagingArea::stage_as`]):
//! the core keeps a record of every repository path it is given (about 9 KB each), so a tree at
//! a new path for every load grew the serving process by that much per load and unload, and a
//! soak of loads with the same few names at the same paths stays flat. A name's earlier tree
//! still waiting for its removal is moved aside first (its removal follows it there).

use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::walk::{MAX_DEPTH, MAX_ENTRIES};

/// The environment variable naming the folder the private trees are made in.
pub const STAGING_DIR_ENV: &str = "TRIDENT_ARTIFACT_STAGING_DIR";

/// The prefix of each process's folder.
const PROCESS_PREFIX: &str = "trident-artifacts-";
/// The name of the empty working folder in a process's staging folder (no tree's name: trees
/// are numbers, `name-<digest>` and `aside-<number>`).
const WORK: &str = "work";

/// How a tree is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Folders made anew, files hard-linked or copied.
    Private,
    /// Links to the artifact's entries, but for the model folders named.
    Linked,
}

/// Where this process makes its trees.
#[derive(Debug)]
pub struct StagingArea {
    folder: PathBuf,
    next: AtomicU64,
    /// Where each name's latest tree is now, while its [`Staged`] (or its removal) lives.
    named: Mutex<BTreeMap<String, Weak<Mutex<PathBuf>>>>,
}

/// One private tree; removed when dropped.
#[derive(Debug)]
pub struct Staged {
    /// The tree's root: the repository the core is given.
    pub root: PathBuf,
    /// The artifact's folder it stands for.
    pub original: PathBuf,
    /// Where the tree is now: its root, until a later tree of its name moved it aside.
    location: Arc<Mutex<PathBuf>>,
}

impl StagingArea {
    /// The folder this process's trees are made in, under `parent`.
    pub fn folder_under(parent: &Path) -> PathBuf {
        parent.join(format!("{PROCESS_PREFIX}{}", std::process::id()))
    }

    /// This process's staging area under `parent`: made on the first call for `parent` (the
    /// folders of processes that no longer run removed first), the same one after.
    pub fn for_process(parent: &Path) -> Result<Arc<StagingArea>, String> {
        static AREAS: Mutex<BTreeMap<PathBuf, Arc<StagingArea>>> = Mutex::new(BTreeMap::new());
        let mut areas = AREAS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(area) = areas.get(parent) {
            return Ok(Arc::clone(area));
        }
        let area = Arc::new(StagingArea::new(parent)?);
        areas.insert(parent.to_path_buf(), Arc::clone(&area));
        Ok(area)
    }

    fn new(parent: &Path) -> Result<StagingArea, String> {
        sweep(parent);
        let folder = StagingArea::folder_under(parent);
        if folder.exists() {
            remove_tree(&folder);
        }
        std::fs::create_dir_all(parent)
            .and_then(|()| std::fs::create_dir(&folder))
            .and_then(|()| {
                std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700))
            })
            .and_then(|()| {
                std::fs::DirBuilder::new()
                    .mode(0o500)
                    .create(folder.join(WORK))
            })
            .map_err(|e| {
                format!(
                    "cannot make the artifact staging folder {} ({STAGING_DIR_ENV}): {e}",
                    folder.display()
                )
            })?;
        Ok(StagingArea {
            folder,
            next: AtomicU64::new(0),
            named: Mutex::new(BTreeMap::new()),
        })
    }

    /// The folder this process's trees are in.
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// An empty folder, read-only, for the serving process to work in
    /// ([`crate::confine::work_in`]): a relative path the core or a backend resolves against
    /// the working folder finds nothing.
    pub fn working_folder(&self) -> PathBuf {
        self.folder.join(WORK)
    }

    /// Makes a tree of `original` (a folder) in `shape`; for [`Shape::Linked`], `rewritten`
    /// names the model folders made anew. The tree has a path of its own.
    pub fn stage(
        &self,
        original: &Path,
        shape: Shape,
        rewritten: &[String],
    ) -> Result<Staged, String> {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        self.make(
            original,
            shape,
            rewritten,
            self.folder.join(number.to_string()),
        )
    }

    /// [`StagingArea::stage`] at the one path of `name` (a model's name): the earlier tree of
    /// the name, if it is still there, is moved aside first. Call it only while no other load
    /// of `name` runs (the registry reserves the name first).
    pub fn stage_as(
        &self,
        original: &Path,
        shape: Shape,
        rewritten: &[String],
        name: &str,
    ) -> Result<Staged, String> {
        use sha2::Digest as _;
        let digest = hex::encode(sha2::Sha256::digest(name.as_bytes()));
        let root = self.folder.join(format!("name-{}", &digest[..32]));
        let mut named = self.named.lock().unwrap_or_else(|p| p.into_inner());
        match named.get(name).and_then(Weak::upgrade) {
            Some(earlier) => {
                let mut location = earlier.lock().unwrap_or_else(|p| p.into_inner());
                if *location == root {
                    let number = self.next.fetch_add(1, Ordering::Relaxed);
                    let aside = self.folder.join(format!("aside-{number}"));
                    match std::fs::rename(&root, &aside) {
                        Ok(()) => *location = aside,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => {
                            return Err(format!(
                                "cannot move the earlier tree {} aside: {e}",
                                root.display()
                            ));
                        }
                    }
                }
            }
            // Left by a removal that failed: nothing else refers to it.
            None if root.exists() => remove_tree(&root),
            None => {}
        }
        let staged = self.make(original, shape, rewritten, root)?;
        named.insert(name.to_owned(), Arc::downgrade(&staged.location));
        Ok(staged)
    }

    fn make(
        &self,
        original: &Path,
        shape: Shape,
        rewritten: &[String],
        root: PathBuf,
    ) -> Result<Staged, String> {
        let staged = Staged {
            location: Arc::new(Mutex::new(root.clone())),
            root,
            original: original.to_path_buf(),
        };
        let made = match shape {
            Shape::Private => {
                let real = std::fs::canonicalize(original)
                    .map_err(|e| format!("cannot read {}: {e}", original.display()))?;
                let mut budget = MAX_ENTRIES;
                mirror(&real, original, &staged.root, &staged.root, 0, &mut budget)
            }
            Shape::Linked => link_tree(original, &staged.root, rewritten),
        };
        made.map(|()| staged)
    }
}

impl Staged {
    /// Where `path` of the tree is in the artifact (for messages).
    pub fn original_path(&self, path: &Path) -> PathBuf {
        path.strip_prefix(&self.root)
            .map_or_else(|_| path.to_path_buf(), |rest| self.original.join(rest))
    }

    /// Writes `text` as `folder`'s `config.pbtxt` in the tree: a new file in place of what
    /// was there (a hard link's original is left as it was).
    pub fn write_config(&self, folder: &str, text: &str) -> Result<(), String> {
        let folder = self.root.join(folder);
        let fresh = folder.join(".config.pbtxt.trident");
        let target = folder.join("config.pbtxt");
        std::fs::write(&fresh, text)
            .and_then(|()| std::fs::rename(&fresh, &target))
            .map_err(|e| format!("cannot write {}: {e}", target.display()))
    }

    /// Removes the tree now, on this thread (at the end of serving, when no thread would be
    /// left to finish a removal).
    pub fn remove_now(mut self) {
        self.root = PathBuf::new();
        let location = self.location.lock().unwrap_or_else(|p| p.into_inner());
        remove_tree(&location);
    }

    /// Makes every folder of the tree read-only.
    pub fn seal(&self) -> Result<(), String> {
        set_folder_modes(&self.root, 0o555)
            .map_err(|e| format!("cannot seal {}: {e}", self.root.display()))
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if std::mem::take(&mut self.root).as_os_str().is_empty() {
            return;
        }
        // Removing a tree of many files is file system work: never on a serving thread. The
        // location is held while it is removed, so a later tree of the name waits for it.
        let location = Arc::clone(&self.location);
        let spawned = std::thread::Builder::new()
            .name("trident-unstage".into())
            .spawn(move || {
                let location = location.lock().unwrap_or_else(|p| p.into_inner());
                remove_tree(&location);
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "cannot remove an artifact's private tree");
        }
    }
}

/// Mirrors the folder `from` (whose real path under the artifact's real root `real` is
/// walked) into `to`, within the tree rooted at `tree`.
fn mirror(
    real: &Path,
    from: &Path,
    to: &Path,
    tree: &Path,
    depth: usize,
    budget: &mut usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "{} is nested more than {MAX_DEPTH} folders deep",
            from.display()
        ));
    }
    let fail = |path: &Path, e: std::io::Error| format!("cannot stage {}: {e}", path.display());
    std::fs::create_dir(to).map_err(|e| fail(to, e))?;
    for item in std::fs::read_dir(from).map_err(|e| fail(from, e))? {
        *budget = budget.checked_sub(1).ok_or_else(|| {
            format!("the artifact holds more than {MAX_ENTRIES} files and folders")
        })?;
        let item = item.map_err(|e| fail(from, e))?;
        let (source, target) = (item.path(), to.join(item.file_name()));
        let kind = item.file_type().map_err(|e| fail(&source, e))?;
        if kind.is_dir() {
            mirror(real, &source, &target, tree, depth + 1, budget)?;
        } else if kind.is_symlink() {
            let link = match std::fs::canonicalize(&source) {
                Ok(resolved) => match resolved.strip_prefix(real) {
                    Ok(inside) => tree.join(inside),
                    Err(_) => resolved,
                },
                // A dangling link: kept as it is, for the check to name.
                Err(_) => std::fs::read_link(&source).map_err(|e| fail(&source, e))?,
            };
            std::os::unix::fs::symlink(&link, &target).map_err(|e| fail(&target, e))?;
        } else if kind.is_file() {
            link_or_copy(&source, &target)?;
        } else {
            return Err(crate::files::FileError::NotRegular {
                path: source,
                kind: crate::files::kind_of(kind),
            }
            .to_string());
        }
    }
    Ok(())
}

/// Files whose allocated blocks are fewer than their length says are copied only up to this
/// length: a copy is dense, so a sparse file of 100 GiB (a few blocks on the models' file
/// system) would fill the staging folder's.
pub const MAX_SPARSE_COPY_BYTES: u64 = 64 << 20;

/// Hard-links `source` at `target`, or copies it (read-only) where no link can be made; a
/// sparse file past [`MAX_SPARSE_COPY_BYTES`] is refused rather than copied.
fn link_or_copy(source: &Path, target: &Path) -> Result<(), String> {
    if std::fs::hard_link(source, target).is_ok() {
        return Ok(());
    }
    let meta =
        std::fs::metadata(source).map_err(|e| format!("cannot read {}: {e}", source.display()))?;
    let allocated = std::os::unix::fs::MetadataExt::blocks(&meta).saturating_mul(512);
    if meta.len() > MAX_SPARSE_COPY_BYTES && allocated < meta.len() / 2 {
        return Err(format!(
            "{} is a sparse file ({} bytes in {allocated} allocated), which would be copied whole \
             into the staging folder (another file system): set TRIDENT_ARTIFACT_STAGING_DIR on \
             the models' file system, where files are linked, not copied",
            source.display(),
            meta.len()
        ));
    }
    std::fs::copy(source, target)
        .and_then(|_| std::fs::set_permissions(target, std::fs::Permissions::from_mode(0o444)))
        .map_err(|e| {
            format!(
                "cannot copy {} into its private tree {}: {e}",
                source.display(),
                target.display()
            )
        })
}

/// A tree of links to `original`'s entries, but the folders in `rewritten`, made anew with a
/// link to each of their entries.
fn link_tree(original: &Path, root: &Path, rewritten: &[String]) -> Result<(), String> {
    let fail = |path: &Path, e: std::io::Error| format!("cannot stage {}: {e}", path.display());
    let original = std::fs::canonicalize(original).map_err(|e| fail(original, e))?;
    std::fs::create_dir(root).map_err(|e| fail(root, e))?;
    for item in std::fs::read_dir(&original).map_err(|e| fail(&original, e))? {
        let item = item.map_err(|e| fail(&original, e))?;
        let name = item.file_name();
        let target = root.join(&name);
        if rewritten.iter().any(|r| std::ffi::OsStr::new(r) == name) {
            std::fs::create_dir(&target).map_err(|e| fail(&target, e))?;
            for inner in std::fs::read_dir(item.path()).map_err(|e| fail(&item.path(), e))? {
                let inner = inner.map_err(|e| fail(&item.path(), e))?;
                if inner.file_name() != "config.pbtxt" {
                    std::os::unix::fs::symlink(inner.path(), target.join(inner.file_name()))
                        .map_err(|e| fail(&target, e))?;
                }
            }
        } else {
            std::os::unix::fs::symlink(item.path(), &target).map_err(|e| fail(&target, e))?;
        }
    }
    Ok(())
}

/// Sets the mode of every folder under `root` (itself included), not following links.
fn set_folder_modes(root: &Path, mode: u32) -> std::io::Result<()> {
    let mut folders = vec![root.to_path_buf()];
    let mut all = Vec::new();
    while let Some(folder) = folders.pop() {
        if mode & 0o200 != 0 {
            // Writable again before its entries are listed.
            std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(mode))?;
        }
        for item in std::fs::read_dir(&folder)?.flatten() {
            if item.file_type().is_ok_and(|t| t.is_dir()) {
                folders.push(item.path());
            }
        }
        all.push(folder);
    }
    if mode & 0o200 == 0 {
        for folder in all.iter().rev() {
            std::fs::set_permissions(folder, std::fs::Permissions::from_mode(mode))?;
        }
    }
    Ok(())
}

/// Removes a tree, its read-only folders made writable first.
fn remove_tree(root: &Path) {
    let _ = set_folder_modes(root, 0o755);
    if let Err(error) = std::fs::remove_dir_all(root)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(%error, tree = %root.display(), "cannot remove an artifact's private tree");
    }
}

/// Removes the staging folders, under `parent`, of this user's processes that no longer run.
fn sweep(parent: &Path) {
    let uid = rustix::process::geteuid().as_raw();
    for item in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let name = item.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PROCESS_PREFIX))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let ours = item.metadata().is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if ours && !Path::new(&format!("/proc/{pid}")).exists() {
            tracing::info!(folder = %item.path().display(), "removing the artifact trees of a process that ended");
            remove_tree(&item.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, relative: &str, text: &str) {
        let path = root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_private_tree_holds_the_same_files_and_never_writes_through() {
        let (artifact, staging) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        write(
            artifact.path(),
            "m/config.pbtxt",
            "backend: \"onnxruntime\"",
        );
        write(artifact.path(), "m/1/model.onnx", "weights");
        std::os::unix::fs::symlink(
            artifact.path().join("m/1/model.onnx"),
            artifact.path().join("m/1/alias.onnx"),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc/hostname", artifact.path().join("m/out")).unwrap();
        let area = StagingArea::for_process(staging.path()).unwrap();
        let staged = area.stage(artifact.path(), Shape::Private, &[]).unwrap();
        assert_eq!(
            std::fs::read_to_string(staged.root.join("m/1/model.onnx")).unwrap(),
            "weights"
        );
        // A link inside points inside the tree; one out stays out, for the check to refuse.
        let alias = std::fs::read_link(staged.root.join("m/1/alias.onnx")).unwrap();
        assert!(alias.starts_with(&staged.root), "{}", alias.display());
        let out = std::fs::read_link(staged.root.join("m/out")).unwrap();
        assert!(!out.starts_with(&staged.root));
        staged
            .write_config("m", "backend: \"onnxruntime\"\nname: \"m\"\n")
            .unwrap();
        staged.seal().unwrap();
        assert_eq!(
            std::fs::read_to_string(artifact.path().join("m/config.pbtxt")).unwrap(),
            "backend: \"onnxruntime\""
        );
        let mode = std::fs::metadata(staged.root.join("m"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o555, "sealed");
        assert_eq!(
            staged.original_path(&staged.root.join("m/1")),
            artifact.path().join("m/1")
        );
        let root = staged.root.clone();
        drop(staged);
        for _ in 0..200 {
            if !root.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!root.exists());
    }

    /// A FIFO, a socket or a device in an artifact refuses it, naming the file: left out, a
    /// `plugins.toml` that was a FIFO made the model load without its plugins.
    #[test]
    fn what_is_not_a_file_folder_or_link_refuses_the_tree() {
        let (artifact, staging) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        write(artifact.path(), "m/config.pbtxt", "backend: \"python\"");
        let fifo = artifact.path().join("m/plugins.toml");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let socket = artifact.path().join("m/1/socket");
        std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
        let area = StagingArea::for_process(staging.path()).unwrap();
        let error = area
            .stage(artifact.path(), Shape::Private, &[])
            .unwrap_err();
        assert!(
            error.contains(&format!(
                "{} is not a regular file (it is a FIFO)",
                fifo.display()
            )),
            "{error}"
        );
        std::fs::remove_file(&fifo).unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let error = area
            .stage(artifact.path(), Shape::Private, &[])
            .unwrap_err();
        assert!(error.contains("(it is a socket)"), "{error}");
    }

    #[test]
    fn a_linked_tree_links_all_but_the_rewritten_configuration() {
        let (artifact, staging) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        write(artifact.path(), "m/config.pbtxt", "sequence_batching {}");
        write(artifact.path(), "m/1/model.py", "x");
        write(artifact.path(), "other/config.pbtxt", "");
        let area = StagingArea::for_process(staging.path()).unwrap();
        let staged = area
            .stage(artifact.path(), Shape::Linked, &["m".into()])
            .unwrap();
        assert!(!staged.root.join("m/config.pbtxt").exists());
        assert!(staged.root.join("m/1/model.py").is_file());
        assert!(
            std::fs::symlink_metadata(staged.root.join("other"))
                .unwrap()
                .is_symlink()
        );
    }

    /// A name's trees are made at one path (the core keeps a record of every path it is
    /// given); an earlier tree still alive is moved aside, and its removal never touches the
    /// later one.
    #[test]
    fn a_names_trees_share_one_path_and_never_remove_each_other() {
        let (artifact, staging) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        write(artifact.path(), "m/config.pbtxt", "backend: \"python\"");
        let area = StagingArea::for_process(staging.path()).unwrap();
        let first = area
            .stage_as(artifact.path(), Shape::Private, &[], "tenant-a")
            .unwrap();
        first.seal().unwrap();
        let root = first.root.clone();
        // The next load of the name while the first tree still lives (its model's last
        // request still holds it).
        let second = area
            .stage_as(artifact.path(), Shape::Private, &[], "tenant-a")
            .unwrap();
        assert_eq!(second.root, root, "one path per name");
        let other = area
            .stage_as(artifact.path(), Shape::Private, &[], "tenant-b")
            .unwrap();
        assert_ne!(other.root, root);
        drop(first);
        drop(other);
        let waited = std::time::Instant::now();
        let trees = || {
            std::fs::read_dir(area.folder())
                .unwrap()
                .filter(|entry| entry.as_ref().unwrap().file_name() != WORK)
                .count()
        };
        while trees() > 1 {
            assert!(waited.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            root.join("m/config.pbtxt").is_file(),
            "the later tree is whole"
        );
        drop(second);
        let waited = std::time::Instant::now();
        while root.exists() {
            assert!(waited.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // And again, after the name's trees are all gone.
        let third = area
            .stage_as(artifact.path(), Shape::Private, &[], "tenant-a")
            .unwrap();
        assert_eq!(third.root, root);
    }

    #[test]
    fn the_trees_of_ended_processes_are_swept() {
        let staging = tempfile::tempdir().unwrap();
        let stale = staging
            .path()
            .join(format!("{PROCESS_PREFIX}{}", u32::MAX - 1));
        write(&stale, "0/m/config.pbtxt", "");
        set_folder_modes(&stale, 0o555).unwrap();
        let unrelated = staging.path().join("something-else");
        std::fs::create_dir(&unrelated).unwrap();
        let area = StagingArea::for_process(staging.path()).unwrap();
        assert!(!stale.exists());
        assert!(unrelated.exists());
        assert!(area.folder().exists());
    }

    #[test]
    fn a_sparse_file_is_not_copied_dense_onto_another_file_system() {
        use std::os::unix::fs::MetadataExt;
        let source = tempfile::tempdir().unwrap();
        let Ok(other) = tempfile::tempdir_in("/dev/shm") else {
            return;
        };
        let source_dev = std::fs::metadata(source.path()).unwrap().dev();
        if std::fs::metadata(other.path()).unwrap().dev() == source_dev {
            return;
        }
        let sparse = source.path().join("sparse.bin");
        std::fs::File::create(&sparse)
            .unwrap()
            .set_len(MAX_SPARSE_COPY_BYTES * 4)
            .unwrap();
        let refused = link_or_copy(&sparse, &other.path().join("sparse.bin")).unwrap_err();
        assert!(refused.contains("sparse"), "{refused}");
        let small = source.path().join("small.bin");
        std::fs::write(&small, b"weights").unwrap();
        link_or_copy(&small, &other.path().join("small.bin")).unwrap();
    }
}

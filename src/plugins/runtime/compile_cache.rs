//! Compiled plugins kept on disk between starts, so a restart with unchanged plugins skips
//! compilation (seconds for an 18 MB Python component, milliseconds from the cache).
//!
//! wasmtime's own cache stores the entries, each named by a SHA-256 of everything that makes
//! compiled code usable here: the component's bytes, wasmtime's version, the engine's settings
//! and the CPU features code is compiled for. A foreign entry (another version, other settings,
//! another machine's CPU) therefore has another name and is never looked up. What wasmtime does
//! not do is check that an entry's bytes are the ones it wrote; it loads them as machine code.
//! trident adds that check: after loading plugins it records the SHA-256 of every entry in the
//! folder (`trident-index`), and before an engine may read any entry it deletes every one the
//! index does not vouch for: corrupt, truncated, swapped, planted, or written by a process that
//! had not recorded it yet. Such a plugin is compiled again; the cache never fails a load.
//!
//! The folder must belong to the user trident runs as and be writable by nobody else (like
//! `~/.ssh`); otherwise the cache is not used. Entries are written atomically by wasmtime
//! (a temporary file renamed), so a reader sees a whole entry or none. Several processes may
//! share a folder: the worst a race does is delete an entry another process has not recorded
//! yet, which costs a compilation, never a wrong entry.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The index of vouched-for entries: one `<sha256 hex> <path relative to the folder>` per line.
const INDEX: &str = "trident-index";

/// Where wasmtime keeps entries, under the folder.
const ENTRIES: &str = "modules";

/// An open compile cache.
#[derive(Clone)]
pub struct CompileCache {
    dir: PathBuf,
    cache: wasmtime::Cache,
    /// The entries found vouched for at open, by relative path: their SHA-256 and the file's
    /// (length, modification time) then, so that sealing need not read them again.
    verified: HashMap<PathBuf, (String, Stamp)>,
    /// The initialisation seed kept in the folder ([`CompileCache::snapshot_seed`]).
    seed: Option<[u8; 32]>,
}

/// A file's length and modification time: an entry with the same stamp is the same file.
type Stamp = (u64, Option<std::time::SystemTime>);

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()))
}

/// The folder used when the manifest names none: `$XDG_CACHE_HOME/trident/plugins`, else
/// `$HOME/.cache/trident/plugins`; none when neither is set.
pub fn default_dir() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .map(|base| base.join("trident").join("plugins"))
}

impl CompileCache {
    /// Opens (creating, mode 0700) the cache in `dir` and removes every entry its index does not
    /// vouch for. Fails, for the caller to carry on without a cache, when the folder cannot be
    /// created or others may write to it.
    pub fn open(dir: &Path) -> Result<CompileCache, String> {
        let fail = |what: String| format!("compile cache {}: {what}", dir.display());
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| fail(format!("cannot create it: {e}")))?;
        let dir = dir
            .canonicalize()
            .map_err(|e| fail(format!("cannot resolve it: {e}")))?;
        let meta = std::fs::metadata(&dir).map_err(|e| fail(e.to_string()))?;
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me {
            return Err(fail(format!(
                "belongs to uid {}, not to uid {me} that trident runs as",
                meta.uid()
            )));
        }
        if meta.permissions().mode() & 0o022 != 0 {
            return Err(fail(
                "group or others may write to it (chmod go-w to use it)".into(),
            ));
        }
        let index = read_index(&dir);
        let mut verified = HashMap::new();
        for Entry {
            relative,
            path,
            plain,
        } in entries(&dir)
        {
            let before = stamp(&path);
            let vouched = plain
                && index.get(&relative).is_some_and(|sha| {
                    std::fs::read(&path)
                        .is_ok_and(|bytes| hex::encode(Sha256::digest(bytes)) == *sha)
                });
            if vouched && let Some(before) = before {
                let sha = index[&relative].clone();
                verified.insert(relative, (sha, before));
            } else if !vouched {
                tracing::warn!(entry = %path.display(), "compile cache: removing an entry the index does not vouch for");
                if let Err(e) = std::fs::remove_file(&path) {
                    return Err(fail(format!(
                        "cannot remove the unvouched entry {}: {e}",
                        path.display()
                    )));
                }
            }
        }
        let mut config = wasmtime::CacheConfig::new();
        config
            .with_directory(&dir)
            // wasmtime recompresses an entry after this many uses, rewriting it: the index
            // would no longer vouch for it and it would be compiled again. Never.
            .with_optimized_compression_usage_counter_threshold(u64::MAX);
        let cache = wasmtime::Cache::new(config).map_err(|e| fail(format!("{e:#}")))?;
        let seed = read_or_make_seed(&dir);
        Ok(CompileCache {
            dir,
            cache,
            verified,
            seed,
        })
    }

    /// The seed plugins' initialisation draws its randomness from ([`super::snapshot`]), kept
    /// in this folder so that a plugin initialised again after a restart is the same component,
    /// whose compiled code is found here; `None` when it cannot be kept (each process then
    /// draws its own).
    pub fn snapshot_seed(&self) -> Option<[u8; 32]> {
        self.seed
    }

    /// The wasmtime cache to give the engine's `Config`.
    pub fn wasmtime(&self) -> wasmtime::Cache {
        self.cache.clone()
    }

    /// Components read from the cache, and compiled, by engines using it since it opened.
    pub fn hits_and_misses(&self) -> (usize, usize) {
        (self.cache.cache_hits(), self.cache.cache_misses())
    }

    /// Records every entry now in the folder in the index (written to a temporary file and
    /// renamed over the old index). Call after compiling, when the entries are complete. Only
    /// entries that are new or changed since [`CompileCache::open`] are read.
    pub fn seal(&self) {
        let mut text = String::new();
        for entry in entries(&self.dir).into_iter().filter(|e| e.plain) {
            let Entry { relative, path, .. } = entry;
            let known = self
                .verified
                .get(&relative)
                .filter(|(_, then)| stamp(&path) == Some(*then))
                .map(|(sha, _)| sha.clone());
            let sha = known.or_else(|| {
                std::fs::read(&path)
                    .ok()
                    .map(|bytes| hex::encode(Sha256::digest(bytes)))
            });
            if let Some(sha) = sha {
                text.push_str(&format!("{sha} {}\n", relative.display()));
            }
        }
        let temporary = self.dir.join(format!("{INDEX}.wip-{}", std::process::id()));
        let written = std::fs::File::create(&temporary)
            .and_then(|mut file| file.write_all(text.as_bytes()))
            .and_then(|()| std::fs::rename(&temporary, self.dir.join(INDEX)));
        if let Err(e) = written {
            drop(std::fs::remove_file(&temporary));
            tracing::warn!(cache = %self.dir.display(), error = %e, "compile cache: cannot write the index; its entries will be compiled again next time");
        }
    }
}

/// The file in the cache folder holding the initialisation seed (64 hex digits, mode 0600).
const SEED: &str = "snapshot-seed";

/// The cache's initialisation seed: read, or made and written when there is none.
fn read_or_make_seed(dir: &Path) -> Option<[u8; 32]> {
    let path = dir.join(SEED);
    if let Ok(text) = crate::files::read_regular_text(&path, 256) {
        let seed = hex::decode(text.trim())
            .ok()
            .and_then(|b| b.try_into().ok());
        if seed.is_none() {
            tracing::warn!(file = %path.display(), "compile cache: the snapshot seed is not 64 hex digits; plugins draw a new one each start");
        }
        return seed;
    }
    let seed: [u8; 32] = rand::random();
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut file| writeln!(file, "{}", hex::encode(seed)));
    match written {
        Ok(()) => Some(seed),
        Err(error) => {
            tracing::warn!(file = %path.display(), %error, "compile cache: cannot keep a snapshot seed; plugins draw a new one each start");
            None
        }
    }
}

fn read_index(dir: &Path) -> HashMap<PathBuf, String> {
    let text = std::fs::read_to_string(dir.join(INDEX)).unwrap_or_default();
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .filter(|(sha, _)| sha.len() == 64)
        .map(|(sha, path)| (PathBuf::from(path), sha.to_owned()))
        .collect()
}

/// One of wasmtime's entries in the folder.
struct Entry {
    /// Its path relative to the folder, as the index names it.
    relative: PathBuf,
    path: PathBuf,
    /// A plain file: a symbolic link or anything else named like an entry is never vouched for.
    plain: bool,
}

/// wasmtime's entries under the folder: everything but folders whose name has no extension
/// (entries are named by base64url digests; its statistics and temporary files have one).
fn entries(dir: &Path) -> Vec<Entry> {
    let mut found = Vec::new();
    let mut pending = vec![dir.join(ENTRIES)];
    while let Some(folder) = pending.pop() {
        let Ok(listing) = std::fs::read_dir(&folder) else {
            continue;
        };
        for item in listing.flatten() {
            let path = item.path();
            // The kind of the item itself: a symbolic link is not followed.
            let Ok(kind) = item.file_type() else { continue };
            if kind.is_dir() {
                pending.push(path);
            } else if path.extension().is_none()
                && let Ok(relative) = path.strip_prefix(dir)
            {
                found.push(Entry {
                    relative: relative.to_owned(),
                    plain: kind.is_file(),
                    path,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_without_a_vouching_index_line_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("cache");
        CompileCache::open(&folder).unwrap();
        let entries_dir = folder.join(ENTRIES).join("wasmtime-test");
        std::fs::create_dir_all(&entries_dir).unwrap();
        std::fs::write(entries_dir.join("AAAA"), b"compiled").unwrap();
        std::fs::write(entries_dir.join("AAAA.stats"), b"usages = 1").unwrap();
        let cache = CompileCache::open(&folder).unwrap();
        assert!(!entries_dir.join("AAAA").exists(), "unindexed entry kept");
        assert!(
            entries_dir.join("AAAA.stats").exists(),
            "statistics removed"
        );

        std::fs::write(entries_dir.join("BBBB"), b"compiled").unwrap();
        cache.seal();
        CompileCache::open(&folder).unwrap();
        assert_eq!(
            std::fs::read(entries_dir.join("BBBB")).unwrap(),
            b"compiled"
        );

        std::fs::write(entries_dir.join("BBBB"), b"compiles").unwrap();
        CompileCache::open(&folder).unwrap();
        assert!(!entries_dir.join("BBBB").exists(), "changed entry kept");
    }

    #[test]
    fn a_symbolic_link_named_like_an_entry_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("cache");
        let entries_dir = folder.join(ENTRIES).join("wasmtime-test");
        std::fs::create_dir_all(&entries_dir).unwrap();
        std::fs::write(dir.path().join("elsewhere"), b"compiled").unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), entries_dir.join("CCCC")).unwrap();
        CompileCache::open(&folder).unwrap().seal();
        let index = std::fs::read_to_string(folder.join(INDEX)).unwrap();
        assert!(!index.contains("CCCC"), "a link was vouched for: {index}");
        assert!(std::fs::symlink_metadata(entries_dir.join("CCCC")).is_err());
        assert!(
            dir.path().join("elsewhere").exists(),
            "the link's target was touched"
        );
    }

    #[test]
    fn a_folder_others_may_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("shared");
        std::fs::create_dir(&folder).unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = CompileCache::open(&folder).err().unwrap();
        assert!(error.contains("may write to it"), "{error}");
    }
}

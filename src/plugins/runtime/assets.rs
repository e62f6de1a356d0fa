//! A plugin's assets: the files it reads (a label list, a preprocessing configuration, a
//! vocabulary), named in the manifest (`[plugins.<name>.assets]`) and offered to the guest
//! through the `assets` interface (`assets.get("labels")`).
//!
//! Each asset is read once, when the plugin loads, and kept in memory read-only: a guest never
//! sees a file system, and a file changed after the load changes nothing served. An asset must
//! - be named `[A-Za-z0-9._-]`, at most [`MAX_NAME_BYTES`] bytes, one of at most [`MAX_ASSETS`];
//! - be a regular file beside the manifest: its path relative, without `..`, and inside the
//!   manifest's folder once links are resolved (a model artifact's plugins read only their
//!   artifact);
//! - hold at most [`MAX_ASSET_BYTES`], and the plugin's assets [`MAX_TOTAL_BYTES`] together;
//! - match the manifest's `sha256`, and be covered by the plugin's signature when signatures
//!   are required ([`crate::plugins::platform::signing::signed_message`]: a signed plugin with swapped labels is
//!   refused);
//! - under Secure Mode, be a kind of file Secure Mode allows (`artifacts::allow_list`).
//!
//! Any failure refuses the plugin's load, naming the asset and its file.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

/// The most assets one plugin may name.
pub const MAX_ASSETS: usize = 16;
/// The largest asset (a tokenizer's `tokenizer.json` is typically 2 to 20 MB).
pub const MAX_ASSET_BYTES: u64 = 32 << 20;
/// The most bytes one plugin's assets may hold together (they stay in memory while it is
/// loaded).
pub const MAX_TOTAL_BYTES: u64 = 64 << 20;
/// The longest asset name.
pub const MAX_NAME_BYTES: usize = 64;

/// One file a plugin reads (this module).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetSpec {
    /// The file, relative to the manifest's folder and inside it (resolved against it once
    /// the manifest is read).
    pub path: PathBuf,
    /// The file's SHA-256, 64 hex digits; a file that does not match refuses the plugin.
    pub sha256: String,
}

/// A plugin's assets, read and verified: the bytes by name, and each one's digest.
#[derive(Debug, Clone, Default)]
pub struct Assets {
    files: Arc<BTreeMap<String, Asset>>,
}

#[derive(Debug)]
struct Asset {
    bytes: Arc<[u8]>,
    sha256: String,
}

impl Assets {
    /// The bytes of the asset named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<[u8]>> {
        self.files.get(name).map(|asset| &asset.bytes)
    }

    /// Each asset's name and lower-case hex SHA-256, by name.
    pub fn digests(&self) -> impl Iterator<Item = (&str, &str)> {
        self.files
            .iter()
            .map(|(name, asset)| (name.as_str(), asset.sha256.as_str()))
    }

    /// Assets given directly (`trident plugin run --asset`, benches): `(name, bytes)`.
    pub fn from_bytes(files: impl IntoIterator<Item = (String, Vec<u8>)>) -> Assets {
        let files = files
            .into_iter()
            .map(|(name, bytes)| {
                let sha256 = super::digest::sha256_hex(&bytes);
                let bytes = Arc::from(bytes);
                (name, Asset { bytes, sha256 })
            })
            .collect();
        Assets {
            files: Arc::new(files),
        }
    }
}

/// Checks what the manifest says of a plugin's assets, before any file is read.
pub fn check_specs(assets: &BTreeMap<String, AssetSpec>) -> Result<(), String> {
    if assets.len() > MAX_ASSETS {
        return Err(format!(
            "names {} assets; a plugin may read at most {MAX_ASSETS}",
            assets.len()
        ));
    }
    for (name, spec) in assets {
        let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
        if name.is_empty() || name.len() > MAX_NAME_BYTES || !name.bytes().all(plain) {
            return Err(format!(
                "asset '{}': a name is 1 to {MAX_NAME_BYTES} of A-Z a-z 0-9 . _ -",
                name.escape_debug()
            ));
        }
        check_spec(&format!("asset '{name}'"), spec)?;
    }
    Ok(())
}

/// Checks one file's entry (`label` names it in the error): 64 hex digits of digest, and a
/// path that names a file beside the manifest (relative, without `..`).
pub fn check_spec(label: &str, spec: &AssetSpec) -> Result<(), String> {
    if spec.sha256.len() != 64 || !spec.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{label}: sha256 must be 64 hex digits"));
    }
    let beside = spec
        .path
        .components()
        .all(|part| matches!(part, Component::Normal(_) | Component::CurDir));
    if !beside || spec.path.file_name().is_none() {
        return Err(format!(
            "{label}: path {} must name a file beside the manifest (relative, without '..')",
            spec.path.display()
        ));
    }
    Ok(())
}

/// Reads and verifies the assets `specs` names (their paths already resolved against
/// `folder`, the manifest's), off the serving threads; `secure_mode` holds each to Secure
/// Mode's allow-list.
pub async fn read(
    folder: &Path,
    specs: &BTreeMap<String, AssetSpec>,
    secure_mode: bool,
) -> Result<Assets, String> {
    if specs.is_empty() {
        return Ok(Assets::default());
    }
    let (folder, specs) = (folder.to_owned(), specs.clone());
    let deadline = crate::files::READ_DEADLINE;
    let read = tokio::task::spawn_blocking(move || read_all(&folder, &specs, secure_mode));
    match tokio::time::timeout(deadline, read).await {
        Ok(Ok(assets)) => assets,
        Ok(Err(error)) => Err(format!("reading its assets failed: {error}")),
        Err(_) => Err(format!(
            "reading its assets took longer than {} s",
            deadline.as_secs()
        )),
    }
}

fn read_all(
    folder: &Path,
    specs: &BTreeMap<String, AssetSpec>,
    secure_mode: bool,
) -> Result<Assets, String> {
    let folder = canonical_folder(folder)?;
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    for (name, spec) in specs {
        let label = format!("asset '{name}'");
        let limit = (MAX_ASSET_BYTES, "an asset");
        let (bytes, sha256) = read_file(&folder, &label, spec, limit, secure_mode)?;
        total += bytes.len() as u64;
        if total > MAX_TOTAL_BYTES {
            return Err(format!(
                "{label} ({}): the plugin's assets pass the {MAX_TOTAL_BYTES} bytes a plugin's \
                 assets may hold together",
                shown(&spec.path, &folder)
            ));
        }
        let bytes = Arc::from(bytes);
        files.insert(name.clone(), Asset { bytes, sha256 });
    }
    Ok(Assets {
        files: Arc::new(files),
    })
}

/// Reads one more file of a plugin's (`label` names it in errors: its cases file) as its
/// assets are read: inside the manifest's `folder`, at most `limit`'s bytes (its second part
/// names such a file: "a cases file"), matching its digest,
/// a kind Secure Mode allows under `secure_mode`; off the serving threads, within
/// [`crate::files::READ_DEADLINE`].
pub async fn read_one(
    folder: &Path,
    label: &str,
    spec: &AssetSpec,
    limit: (u64, &'static str),
    secure_mode: bool,
) -> Result<Vec<u8>, String> {
    let (folder, label, spec) = (folder.to_owned(), label.to_owned(), spec.clone());
    let deadline = crate::files::READ_DEADLINE;
    let read = tokio::task::spawn_blocking(move || {
        let folder = canonical_folder(&folder)?;
        read_file(&folder, &label, &spec, limit, secure_mode).map(|(bytes, _)| bytes)
    });
    match tokio::time::timeout(deadline, read).await {
        Ok(Ok(read)) => read,
        Ok(Err(error)) => Err(format!("reading it failed: {error}")),
        Err(_) => Err(format!(
            "reading it took longer than {} s",
            deadline.as_secs()
        )),
    }
}

fn canonical_folder(folder: &Path) -> Result<PathBuf, String> {
    folder.canonicalize().map_err(|e| {
        format!(
            "cannot read the manifest's folder {}: {e}",
            folder.display()
        )
    })
}

/// One file's bytes and digest, checked; `folder` is already resolved.
fn read_file(
    folder: &Path,
    label: &str,
    spec: &AssetSpec,
    (max_bytes, noun): (u64, &str),
    secure_mode: bool,
) -> Result<(Vec<u8>, String), String> {
    let fail = |why: String| format!("{label} ({}): {why}", shown(&spec.path, folder));
    let path = inside(&spec.path, folder).map_err(fail)?;
    let bytes = crate::files::read_regular(&path, max_bytes).map_err(|e| match e {
        crate::files::FileError::TooLarge { size, .. } => fail(format!(
            "is {size} bytes; {noun} may have at most {max_bytes}"
        )),
        other => fail(other.to_string()),
    })?;
    let sha256 = super::digest::sha256_hex(&bytes);
    if !sha256.eq_ignore_ascii_case(&spec.sha256) {
        return Err(fail(format!(
            "sha256 mismatch: the manifest pins {}, the file is {sha256}",
            spec.sha256
        )));
    }
    if secure_mode && let Some(why) = secure_mode_refusal(&path, &bytes) {
        return Err(fail(format!("under Secure Mode: {why}")));
    }
    Ok((bytes, sha256))
}

/// `path` with links resolved, when it stays inside `folder` (itself resolved).
fn inside(path: &Path, folder: &Path) -> Result<PathBuf, String> {
    let real = path
        .canonicalize()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if real.starts_with(folder) {
        Ok(real)
    } else {
        Err("is not a file in the manifest's folder (a link leads out of it)".into())
    }
}

/// `path` as an error shows it: relative to the manifest's folder where it can be.
pub fn shown_path(path: &Path, folder: &Path) -> String {
    shown(path, folder)
}

fn shown(path: &Path, folder: &Path) -> String {
    path.strip_prefix(folder)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Why Secure Mode's allow-list refuses an asset, by its name and first bytes.
fn secure_mode_refusal(path: &Path, bytes: &[u8]) -> Option<String> {
    let head = bytes.len().min(crate::artifacts::walk::HEAD_BYTES as usize);
    let entry = crate::artifacts::walk::Entry {
        path: path.to_owned(),
        name: path
            .file_name()
            .map(|name| name.to_string_lossy().to_lowercase())
            .unwrap_or_default(),
        head: bytes[..head].to_vec(),
        ..Default::default()
    };
    crate::artifacts::allow_list::refusal(&entry)
}

/// The tokenizers of the `text` interface are read from a plugin's assets.
impl crate::plugins::primitives::text::TokenizerFiles for Assets {
    fn file(&self, name: &str) -> Option<&[u8]> {
        self.get(name).map(|bytes| &bytes[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(path: &str, sha256: &str) -> AssetSpec {
        AssetSpec {
            path: PathBuf::from(path),
            sha256: sha256.into(),
        }
    }

    fn one(name: &str, spec: AssetSpec) -> BTreeMap<String, AssetSpec> {
        BTreeMap::from([(name.to_owned(), spec)])
    }

    #[test]
    fn names_paths_and_digests_are_checked_before_any_read() {
        let digest = "ab".repeat(32);
        assert!(check_specs(&one("labels", spec("labels.txt", &digest))).is_ok());
        assert!(check_specs(&one("v-1.2_x", spec("sub/vocab.json", &digest))).is_ok());
        for (name, path, sha, why) in [
            (
                "labels",
                "../labels.txt",
                digest.as_str(),
                "beside the manifest",
            ),
            (
                "labels",
                "/etc/passwd",
                digest.as_str(),
                "beside the manifest",
            ),
            (
                "labels",
                "a/../../b",
                digest.as_str(),
                "beside the manifest",
            ),
            ("labels", ".", digest.as_str(), "beside the manifest"),
            ("labels", "labels.txt", "abc", "64 hex digits"),
            ("la bels", "labels.txt", digest.as_str(), "a name is"),
            ("", "labels.txt", digest.as_str(), "a name is"),
        ] {
            let error = check_specs(&one(name, spec(path, sha))).unwrap_err();
            assert!(error.contains(why), "{name} {path}: {error}");
        }
        let many: BTreeMap<String, AssetSpec> = (0..=MAX_ASSETS)
            .map(|i| (format!("a{i}"), spec("x", &digest)))
            .collect();
        assert!(check_specs(&many).unwrap_err().contains("at most 16"));
    }

    #[test]
    fn reads_verify_digests_and_stay_inside_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("m");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("labels.txt"), "cat\ndog\n").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "s3cret").unwrap();
        std::os::unix::fs::symlink("../secret.txt", folder.join("out.txt")).unwrap();
        let digest = super::super::digest::sha256_hex(b"cat\ndog\n");
        let at = |name: &str, sha: &str| spec(folder.join(name).to_str().unwrap(), sha);

        let assets = read_all(&folder, &one("labels", at("labels.txt", &digest)), false).unwrap();
        assert_eq!(&**assets.get("labels").unwrap(), b"cat\ndog\n");
        assert_eq!(assets.digests().collect::<Vec<_>>(), [("labels", &*digest)]);

        let swapped = read_all(
            &folder,
            &one("labels", at("labels.txt", &"0".repeat(64))),
            false,
        );
        let error = swapped.unwrap_err();
        assert!(
            error.contains("asset 'labels' (labels.txt): sha256 mismatch"),
            "{error}"
        );

        let secret = super::super::digest::sha256_hex(b"s3cret");
        let error = read_all(&folder, &one("labels", at("out.txt", &secret)), false).unwrap_err();
        assert!(error.contains("a link leads out of it"), "{error}");

        let error = read_all(&folder, &one("labels", at("gone.txt", &digest)), false).unwrap_err();
        assert!(
            error.contains("asset 'labels' (gone.txt): cannot read it"),
            "{error}"
        );

        // Under Secure Mode an asset is a kind of file Secure Mode allows.
        std::fs::write(folder.join("run.txt"), "#!/bin/sh\nid\n").unwrap();
        let script = super::super::digest::sha256_hex(b"#!/bin/sh\nid\n");
        assert!(read_all(&folder, &one("s", at("run.txt", &script)), false).is_ok());
        let error = read_all(&folder, &one("s", at("run.txt", &script)), true).unwrap_err();
        assert!(error.contains("under Secure Mode"), "{error}");
    }
}

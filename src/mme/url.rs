//! Validation of the `url` a multi-model endpoint load names: lexically normalised, then held to
//! the form `<models root>/<hash>/model[/<subdir>]`, and (beyond Triton's frontend) checked on
//! disk so a symlink cannot lead out of the models root.

use std::path::{Component, Path, PathBuf};

/// A refused url, with the reason a client is shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UrlError(pub String);

/// A url that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelUrl {
    /// The normalised url.
    pub path: PathBuf,
}

/// Normalises a path lexically: `.` and empty components dropped, `..` removes its parent.
/// Returns `None` when `..` would climb above the root.
pub fn normalise(path: &str) -> Option<PathBuf> {
    let mut parts: Vec<&str> = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(part) => parts.push(part.to_str()?),
            Component::Prefix(_) => return None,
        }
    }
    Some(std::iter::once("/").chain(parts).collect())
}

fn is_name(part: &str) -> bool {
    !part.is_empty()
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_')
}

/// Checks `url` against `models_root` (lexically, then on disk).
pub fn validate(url: &str, models_root: &Path) -> Result<ModelUrl, UrlError> {
    if !url.starts_with('/') {
        return Err(UrlError(format!(
            "model url '{url}' must be an absolute path"
        )));
    }
    let path = normalise(url)
        .ok_or_else(|| UrlError(format!("model url '{url}' climbs above the root")))?;
    for forbidden in ["/dev", "/proc", "/sys"] {
        if path.starts_with(forbidden) {
            return Err(UrlError(format!(
                "model url '{url}' points into {forbidden}, which is not allowed"
            )));
        }
    }
    let form = || {
        UrlError(format!(
            "model url '{url}' must have the form {}/<hash>/model[/<subdir>]",
            models_root.display()
        ))
    };
    let relative = path.strip_prefix(models_root).map_err(|_| form())?;
    let parts: Vec<&str> = relative.iter().filter_map(|p| p.to_str()).collect();
    let shape_ok = match parts.as_slice() {
        [hash, "model"] => is_name(hash),
        [hash, "model", subdir] => is_name(hash) && is_name(subdir),
        _ => false,
    };
    if !shape_ok {
        return Err(form());
    }
    // Beyond the lexical form: the folder must exist, and resolving symlinks must keep it
    // inside the models root.
    let real = std::fs::canonicalize(&path)
        .map_err(|_| UrlError(format!("model url '{url}' does not exist")))?;
    let real_root = std::fs::canonicalize(models_root).map_err(|_| form())?;
    if !real.starts_with(&real_root) {
        return Err(UrlError(format!(
            "model url '{url}' resolves outside {}",
            models_root.display()
        )));
    }
    if !real.is_dir() {
        return Err(UrlError(format!("model url '{url}' is not a directory")));
    }
    Ok(ModelUrl { path })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_is_lexical() {
        assert_eq!(normalise("/a/./b//c/../d"), Some(PathBuf::from("/a/b/d")));
        assert_eq!(normalise("/a/.."), Some(PathBuf::from("/")));
        assert_eq!(normalise("/.."), None);
        assert_eq!(normalise("/a/../../b"), None);
    }

    fn root_with(paths: &[&str]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for p in paths {
            std::fs::create_dir_all(root.path().join(p)).unwrap();
        }
        root
    }

    #[test]
    fn accepted_forms() {
        let root = root_with(&["abc123/model/sub_dir.1", "h.a_sh/model"]);
        let r = root.path().display();
        for url in [
            format!("{r}/abc123/model"),
            format!("{r}/abc123/model/sub_dir.1"),
            format!("{r}/h.a_sh/model/"),
            format!("{r}/abc123/./model"),
            format!("{r}/other/../abc123/model"),
        ] {
            let checked = validate(&url, root.path()).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert!(checked.path.starts_with(root.path()));
        }
    }

    #[test]
    fn refused_forms() {
        let root = root_with(&["abc/model/sub", "abc/other", "ab-c/model", "abc/model/a/b"]);
        let r = root.path().display();
        for url in [
            "relative/abc/model".to_string(),
            "/dev/shm/abc/model".into(),
            "/proc/self/model".into(),
            "/sys/kernel/model".into(),
            format!("{r}/../../etc/model"),
            format!("{r}/abc/model/../../../../x/model"),
            format!("{r}/abc"),
            format!("{r}/abc/other"),
            format!("{r}/ab-c/model"),
            format!("{r}/abc/model/a/b"),
            format!("{r}/missing/model"),
            "/opt/ml/modelsX/abc/model".into(),
            "/..".into(),
        ] {
            assert!(validate(&url, root.path()).is_err(), "accepted {url}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlink_escapes_are_refused() {
        let root = root_with(&["abc"]);
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("abc/model")).unwrap();
        let url = format!("{}/abc/model", root.path().display());
        let error = validate(&url, root.path()).unwrap_err();
        assert!(error.0.contains("resolves outside"), "{error}");
    }
}

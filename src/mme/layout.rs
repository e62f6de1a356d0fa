//! Where the model of a multi-model endpoint url lives: which folder is registered with Triton
//! as a repository, and which of its folders is the model.

use std::path::{Path, PathBuf};

/// A repository to register and the model folder inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The folder registered with Triton as a model repository.
    pub repository: PathBuf,
    /// The name of the model's folder inside `repository`.
    pub folder: String,
}

/// Why no model was found at a url.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LayoutError(pub String);

/// Finds the model at `url` (already validated):
/// - `<url>/config.pbtxt` exists, or every subfolder of the url is a version folder (`1/`,
///   `2/`: a model with no configuration, say a bare `1/model.onnx` that Triton completes): the
///   url is the model folder, its parent the repository;
/// - otherwise the url is the repository, and its model folder is its only subfolder or, among
///   several, the one whose `config.pbtxt` declares `platform: "ensemble"`.
pub fn find_model(url: &Path) -> Result<Layout, LayoutError> {
    if url.join("config.pbtxt").is_file() || holds_only_versions(url) {
        let folder = url.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
            LayoutError(format!("model url '{}' has no folder name", url.display()))
        })?;
        let repository = url.parent().unwrap_or(url).to_path_buf();
        return Ok(Layout {
            repository,
            folder: folder.to_owned(),
        });
    }
    let mut folders: Vec<String> = std::fs::read_dir(url)
        .map_err(|e| LayoutError(format!("cannot read model url '{}': {e}", url.display())))?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| !name.starts_with('.'))
        .collect();
    folders.sort();
    let folder = match folders.as_slice() {
        [] => {
            return Err(LayoutError(format!(
                "no model found at '{}': it has neither config.pbtxt nor a model folder",
                url.display()
            )));
        }
        [only] => only.clone(),
        several => several
            .iter()
            .find(|name| is_ensemble(&url.join(name).join("config.pbtxt")))
            .cloned()
            .ok_or_else(|| {
                LayoutError(format!(
                    "'{}' holds several model folders ({}) and none is an ensemble",
                    url.display(),
                    several.join(", ")
                ))
            })?,
    };
    Ok(Layout {
        repository: url.to_path_buf(),
        folder,
    })
}

/// Whether `folder` has subfolders and every one is named by a version number.
fn holds_only_versions(folder: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return false;
    };
    let mut versions = 0;
    for entry in entries.filter_map(Result::ok) {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        versions += 1;
    }
    versions > 0
}

/// Whether a `config.pbtxt` declares `platform: "ensemble"` (comments ignored).
pub fn is_ensemble(config: &Path) -> bool {
    // A regular file of a sane size only: a FIFO would block, and the core refuses what is
    // not a configuration anyway.
    let Ok(text) = crate::files::read_regular_text(config, 4 << 20) else {
        return false;
    };
    text.lines()
        .map(|line| line.split('#').next().unwrap_or(""))
        .filter_map(|line| line.trim().strip_prefix("platform"))
        .filter_map(|rest| rest.trim_start().strip_prefix(':'))
        .any(|value| value.trim().trim_matches('"') == "ensemble")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn url_with_config_is_the_model_folder() {
        let root = tempfile::tempdir().unwrap();
        let url = root.path().join("hash/model");
        write(&url.join("config.pbtxt"), "backend: \"python\"");
        let layout = find_model(&url).unwrap();
        assert_eq!(layout.repository, root.path().join("hash"));
        assert_eq!(layout.folder, "model");
    }

    #[test]
    fn url_with_only_version_folders_is_the_model_folder() {
        let root = tempfile::tempdir().unwrap();
        let url = root.path().join("hash/model");
        write(&url.join("1/model.onnx"), "onnx");
        write(&url.join("labels.txt"), "cat");
        let layout = find_model(&url).unwrap();
        assert_eq!(layout.repository, root.path().join("hash"));
        assert_eq!(layout.folder, "model");
        // A folder that is not a version makes the url a repository again.
        write(&url.join("extra/config.pbtxt"), "backend: \"python\"");
        assert!(find_model(&url).is_err());
    }

    #[test]
    fn url_without_config_is_a_repository() {
        let root = tempfile::tempdir().unwrap();
        let url = root.path().join("hash/model");
        write(&url.join("resnet/config.pbtxt"), "backend: \"onnxruntime\"");
        let layout = find_model(&url).unwrap();
        assert_eq!(layout.repository, url);
        assert_eq!(layout.folder, "resnet");
    }

    #[test]
    fn the_ensemble_wins_among_several() {
        let root = tempfile::tempdir().unwrap();
        let url = root.path().join("hash/model");
        write(&url.join("a_pre/config.pbtxt"), "backend: \"python\"");
        write(
            &url.join("b_ens/config.pbtxt"),
            "# platform: \"other\"\nplatform : \"ensemble\"\n",
        );
        write(&url.join("c_post/config.pbtxt"), "backend: \"python\"");
        assert_eq!(find_model(&url).unwrap().folder, "b_ens");
    }

    #[test]
    fn several_without_ensemble_or_none_are_errors() {
        let root = tempfile::tempdir().unwrap();
        let url = root.path().join("hash/model");
        write(&url.join("a/config.pbtxt"), "backend: \"python\"");
        write(&url.join("b/config.pbtxt"), "# platform: \"ensemble\"");
        assert!(
            find_model(&url)
                .unwrap_err()
                .0
                .contains("none is an ensemble")
        );
        let empty = root.path().join("empty/model");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(find_model(&empty).unwrap_err().0.contains("no model found"));
    }
}

//! Reads a model artifact once for the rules: every file under its folder (links followed only
//! where they stay inside it), with the little of each that the rules look at.

use std::path::{Path, PathBuf};

use super::model_config::ModelConfigFacts;
use super::text_format::{self, Message};

/// The most files and folders an artifact may hold for trident to check it: past this, it is
/// refused rather than let through unchecked.
pub const MAX_ENTRIES: usize = 100_000;
/// The deepest folder nesting checked (past it, refused).
pub const MAX_DEPTH: usize = 32;
/// Bytes read from the start of each file (magic numbers, archive headers).
pub const HEAD_BYTES: u64 = 512;
/// The largest configuration or JSON file the rules read whole.
const MAX_READ_BYTES: u64 = 16 << 20;

/// One file of an artifact, as the rules see it.
#[derive(Debug, Clone, Default)]
pub struct Entry {
    /// Where it is.
    pub path: PathBuf,
    /// Its file name, in lower case.
    pub name: String,
    /// Its first bytes (empty for what is not a regular file).
    pub head: Vec<u8>,
    /// For a model's `config.pbtxt` (in a folder of the artifact's root, where the core reads
    /// one): what the rules read of it.
    pub config: Option<ModelConfigFacts>,
    /// For a model's `config.pbtxt`: the whole configuration.
    pub config_tree: Option<Message>,
    /// For the JSON files rules read (`model.json`, `config.json`, `tokenizer_config.json`,
    /// `chat_template.json`, `processor_config.json`, `preprocessor_config.json`): the
    /// top-level object.
    pub json: Option<serde_json::Map<String, serde_json::Value>>,
    /// Why the rules cannot read it, when they cannot (a link out of the artifact, a
    /// configuration that does not parse, an unreadable file).
    pub unreadable: Option<String>,
}

/// Why an artifact could not be walked at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WalkError(pub String);

/// Every file under `root` (which must be a folder).
pub fn walk(root: &Path) -> Result<Vec<Entry>, WalkError> {
    let real_root = std::fs::canonicalize(root)
        .map_err(|e| WalkError(format!("cannot read {}: {e}", root.display())))?;
    let mut entries = Vec::new();
    let mut folders = vec![(root.to_path_buf(), 0usize)];
    let mut seen = 0usize;
    while let Some((folder, depth)) = folders.pop() {
        if depth > MAX_DEPTH {
            return Err(WalkError(format!(
                "{} is nested more than {MAX_DEPTH} folders deep",
                folder.display()
            )));
        }
        let listing = std::fs::read_dir(&folder)
            .map_err(|e| WalkError(format!("cannot read {}: {e}", folder.display())))?;
        for item in listing {
            seen += 1;
            if seen > MAX_ENTRIES {
                return Err(WalkError(format!(
                    "{} holds more than {MAX_ENTRIES} files and folders",
                    root.display()
                )));
            }
            let item =
                item.map_err(|e| WalkError(format!("cannot read {}: {e}", folder.display())))?;
            let path = item.path();
            let Ok(kind) = item.file_type() else {
                entries.push(unreadable(path, "cannot be read".into()));
                continue;
            };
            if kind.is_dir() {
                folders.push((path, depth + 1));
            } else if kind.is_symlink() {
                match std::fs::canonicalize(&path) {
                    Ok(target) if target.starts_with(&real_root) => {
                        // A folder inside the artifact is walked under its own name; a file
                        // is read through the link (its name here is the one the core sees).
                        if !target.is_dir() {
                            entries.push(read_entry(path, depth));
                        }
                    }
                    _ => entries.push(unreadable(
                        path,
                        "is a link that leads out of the artifact".into(),
                    )),
                }
            } else {
                entries.push(read_entry(path, depth));
            }
        }
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(entries)
}

fn unreadable(path: PathBuf, why: String) -> Entry {
    Entry {
        name: lower_name(&path),
        path,
        unreadable: Some(why),
        ..Entry::default()
    }
}

fn lower_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default()
}

/// The JSON files whose keys the rules read.
const JSON_READ: [&str; 6] = [
    "model.json",
    "config.json",
    "tokenizer_config.json",
    "chat_template.json",
    "processor_config.json",
    "preprocessor_config.json",
];

/// Reads the file at `path`, in a folder `depth` below the root.
fn read_entry(path: PathBuf, depth: usize) -> Entry {
    let name = lower_name(&path);
    let mut entry = Entry {
        name,
        ..Entry::default()
    };
    match crate::files::read_head(&path, HEAD_BYTES) {
        Ok(head) => entry.head = head,
        // FIFOs, sockets and devices hold no model code; the core cannot load them either.
        Err(crate::files::FileError::NotRegular { .. }) => {}
        Err(error) => entry.unreadable = Some(error.to_string()),
    }
    if path.file_name().is_some_and(|n| n == "config.pbtxt") && depth == 1 {
        match crate::files::read_regular(&path, MAX_READ_BYTES) {
            Ok(bytes) => match text_format::parse(&bytes) {
                Ok(tree) => {
                    entry.config = Some(ModelConfigFacts::of(&tree));
                    entry.config_tree = Some(tree);
                }
                Err(why) => {
                    entry.unreadable = Some(format!(
                        "is a model configuration trident cannot read: {why}"
                    ));
                }
            },
            Err(error) => entry.unreadable = Some(error.to_string()),
        }
    } else if JSON_READ.contains(&entry.name.as_str()) {
        let parsed = crate::files::read_regular(&path, MAX_READ_BYTES)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                serde_json::from_slice::<serde_json::Value>(&bytes)
                    .map_err(|e| format!("is not JSON: {e}"))
            });
        match parsed {
            Ok(serde_json::Value::Object(map)) => entry.json = Some(map),
            Ok(_) => {}
            Err(why) => entry.unreadable = Some(why),
        }
    }
    entry.path = path;
    entry
}

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
/// The largest JSON file the rules read (only the keys they look at are kept).
const MAX_READ_BYTES: u64 = 16 << 20;
/// The largest `config.pbtxt` trident reads: a real one is a few kilobytes (labels live in
/// files of their own).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

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
    /// Tensor bytes that something of the artifact names, under whatever name (the
    /// allow-list's `mark_raw_data`): Secure Mode's allow-list takes it for raw weights, and the
    /// pickle control judges it by its contents, not its name.
    pub raw_data: bool,
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
        Ok(head) if head.starts_with(b"\x93NUMPY") => {
            // A NumPy header is read whole (up to 1 MiB), wherever its `descr` lies.
            entry.head = crate::files::read_head(&path, numpy_header_end(&head)).unwrap_or(head);
        }
        Ok(head) => entry.head = head,
        // FIFOs, sockets and devices hold no model code; the core cannot load them either.
        Err(crate::files::FileError::NotRegular { .. }) => {}
        Err(error) => entry.unreadable = Some(error.to_string()),
    }
    if path.file_name().is_some_and(|n| n == "config.pbtxt") && depth == 1 {
        match crate::files::read_regular(&path, MAX_CONFIG_BYTES) {
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
                serde_json::from_slice::<KeptKeys>(&bytes).map_err(|e| format!("is not JSON: {e}"))
            });
        match parsed {
            Ok(KeptKeys(Some(map))) => entry.json = Some(map),
            Ok(KeptKeys(None)) => {}
            Err(why) => entry.unreadable = Some(why),
        }
    }
    entry.path = path;
    entry
}

/// Where the header of a NumPy file whose first bytes are `head` ends (at most 1 MiB in).
fn numpy_header_end(head: &[u8]) -> u64 {
    let length = match head.get(6) {
        Some(1) => head
            .get(8..10)
            .map(|b| u64::from(u16::from_le_bytes([b[0], b[1]])) + 10),
        Some(2 | 3) => head
            .get(8..12)
            .map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])) + 12),
        _ => None,
    };
    length.unwrap_or(HEAD_BYTES).clamp(HEAD_BYTES, 1 << 20)
}

/// The top-level keys of a JSON file that the rules read.
const KEPT_KEYS: [&str; 2] = ["trust_remote_code", "chat_template"];

/// A JSON document read for the rules: of a top-level object, only the [`KEPT_KEYS`] (the last
/// of each, as Python reads it); everything else is read through without being kept, so the
/// check's memory is what those values hold, not a tree of the whole file. `None` for a
/// document that is not an object.
struct KeptKeys(Option<serde_json::Map<String, serde_json::Value>>);

impl<'de> serde::Deserialize<'de> for KeptKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KeptVisitor)
    }
}

struct KeptVisitor;

impl<'de> serde::de::Visitor<'de> for KeptVisitor {
    type Value = KeptKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON document")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<KeptKeys, A::Error> {
        let mut kept = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if KEPT_KEYS.contains(&key.as_str()) {
                kept.insert(key, map.next_value()?);
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(KeptKeys(Some(kept)))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<KeptKeys, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(KeptKeys(None))
    }

    fn visit_bool<E>(self, _: bool) -> Result<KeptKeys, E> {
        Ok(KeptKeys(None))
    }

    fn visit_i64<E>(self, _: i64) -> Result<KeptKeys, E> {
        Ok(KeptKeys(None))
    }

    fn visit_u64<E>(self, _: u64) -> Result<KeptKeys, E> {
        Ok(KeptKeys(None))
    }

    fn visit_f64<E>(self, _: f64) -> Result<KeptKeys, E> {
        Ok(KeptKeys(None))
    }

    fn visit_str<E>(self, _: &str) -> Result<KeptKeys, E> {
        Ok(KeptKeys(None))
    }

    fn visit_unit<E>(self) -> Result<KeptKeys, E> {
        Ok(KeptKeys(None))
    }
}

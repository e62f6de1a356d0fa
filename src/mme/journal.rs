//! The models a multi-model endpoint has loaded, written down where a restarted serving process
//! finds them (the supervisor's state folder: [`crate::supervisor`]), so that SageMaker never
//! sees a loaded model go missing when the process running the core is replaced.
//!
//! One JSON file, `{"models":[{"name":…,"url":…,"target":…}]}`, rewritten whole (a new file
//! renamed over the old) after every load and unload; a reader sees the list before or after a
//! change, never half of one.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's name in the state folder.
const FILE: &str = "models.json";

/// A loaded model as its load call named it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// SageMaker's name for it.
    pub name: String,
    /// The url it was loaded from.
    pub url: String,
    /// The name the engine serves it under.
    pub target: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Contents {
    models: Vec<Entry>,
}

/// The journal file of one state folder.
#[derive(Debug, Clone)]
pub struct Journal {
    path: PathBuf,
}

impl Journal {
    /// The journal in `state_dir`.
    pub fn in_folder(state_dir: &Path) -> Journal {
        Journal {
            path: state_dir.join(FILE),
        }
    }

    /// The models written down; none when there is no file yet. A file that cannot be read is
    /// reported and taken as empty: the endpoint starts with no models rather than not at all.
    pub fn read(&self) -> Vec<Entry> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(error) => {
                tracing::error!(%error, file = %self.path.display(), "cannot read the loaded models' journal");
                return Vec::new();
            }
        };
        match serde_json::from_slice::<Contents>(&bytes) {
            Ok(contents) => contents.models,
            Err(error) => {
                tracing::error!(%error, file = %self.path.display(), "the loaded models' journal is not valid");
                Vec::new()
            }
        }
    }

    /// Replaces the journal with `models`.
    pub fn write(&self, models: Vec<Entry>) -> std::io::Result<()> {
        let json = serde_json::to_vec(&Contents { models }).map_err(std::io::Error::other)?;
        let partial = self.path.with_extension("json.partial");
        let mut file = std::fs::File::create(&partial)?;
        file.write_all(&json)?;
        drop(file);
        std::fs::rename(&partial, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> Entry {
        Entry {
            name: name.into(),
            url: format!("/opt/ml/models/{name}/model"),
            target: format!("{name}-target"),
        }
    }

    #[test]
    fn what_is_written_is_read_back_and_replaced_whole() {
        let folder = tempfile::tempdir().unwrap();
        let journal = Journal::in_folder(folder.path());
        assert_eq!(journal.read(), Vec::new());
        journal.write(vec![entry("a"), entry("b")]).unwrap();
        assert_eq!(journal.read(), vec![entry("a"), entry("b")]);
        journal.write(vec![entry("b")]).unwrap();
        assert_eq!(journal.read(), vec![entry("b")]);
        journal.write(Vec::new()).unwrap();
        assert_eq!(journal.read(), Vec::new());
    }

    #[test]
    fn a_damaged_journal_reads_as_empty() {
        let folder = tempfile::tempdir().unwrap();
        let journal = Journal::in_folder(folder.path());
        std::fs::write(folder.path().join(FILE), b"{\"models\": [tru").unwrap();
        assert_eq!(journal.read(), Vec::new());
        std::fs::write(folder.path().join(FILE), b"[1, 2]").unwrap();
        assert_eq!(journal.read(), Vec::new());
    }
}

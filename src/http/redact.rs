//! Keeps the server's own paths out of error bodies. Messages from the Triton core and its
//! backends name files on the server (a python model's traceback names its `model.py`, a failed
//! load names the repository, the core names its install folder); trident logs them in full and
//! answers clients with those folders replaced by a label (`<model repository>/add_sub/1/model.py`).
//! Paths a client sent (multi-model urls) are the client's own and are left alone.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use crate::config::{Config, Mode};

/// Folders to hide, longest first, with the label that replaces them (shared: a clone is a
/// reference count).
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    prefixes: Arc<Vec<(String, &'static str)>>,
}

impl Redactor {
    /// The folders `config` names (model repositories, the plugin manifest's folder, the Triton
    /// installation) plus the usual Triton install folder, each as given and as canonicalised.
    pub fn for_config(config: &Config) -> Redactor {
        let mut redactor = Redactor::default();
        match &config.mode {
            Mode::SingleModel { repository, .. } | Mode::MultiModel { repository, .. } => {
                redactor.hide(repository, "<model repository>");
            }
        }
        if let Some(folder) = config.plugins.as_deref().and_then(Path::parent) {
            redactor.hide(folder, "<plugins>");
        }
        if let Some(home) = &config.core.triton_home {
            redactor.hide(home, "<triton>");
        }
        redactor.hide(Path::new("/opt/tritonserver"), "<triton>");
        redactor
    }

    /// Adds `folder` (and its canonical form) to hide behind `label`.
    pub fn hide(&mut self, folder: &Path, label: &'static str) {
        let mut forms = vec![folder.to_path_buf()];
        if let Ok(canonical) = folder.canonicalize() {
            forms.push(canonical);
        }
        for form in forms {
            // "/" would hide everything and a single component ("/opt") too much: hide only
            // folders at least two levels deep.
            if form.components().count() < 3 {
                continue;
            }
            let text = form.to_string_lossy().trim_end_matches('/').to_owned();
            let prefixes = Arc::make_mut(&mut self.prefixes);
            if !prefixes.iter().any(|(p, _)| *p == text) {
                prefixes.push((text, label));
                prefixes.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
            }
        }
    }

    /// `message` with every hidden folder replaced by its label, where it is the whole folder:
    /// `/opt/ml/model` hides `/opt/ml/model/x/1/model.py`, never `/opt/ml/models/x` (a client's
    /// own multi-model url would read `<model repository>s/x`).
    pub fn redact<'a>(&self, message: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(message);
        for (prefix, label) in self.prefixes.iter() {
            if out.contains(prefix.as_str())
                && let Some(replaced) = replace_folder(&out, prefix, label)
            {
                out = Cow::Owned(replaced);
            }
        }
        out
    }
}

/// `text` with each `folder` that ends where a path component ends replaced by `label`; none
/// when there is none.
fn replace_folder(text: &str, folder: &str, label: &str) -> Option<String> {
    let continues_name = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '~');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut replaced = false;
    while let Some(at) = rest.find(folder) {
        let after = &rest[at + folder.len()..];
        out.push_str(&rest[..at]);
        if after.chars().next().is_some_and(continues_name) {
            out.push_str(folder);
        } else {
            out.push_str(label);
            replaced = true;
        }
        rest = after;
    }
    out.push_str(rest);
    replaced.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_hidden_only_where_its_name_ends() {
        let mut redactor = Redactor::default();
        redactor.hide(Path::new("/opt/ml/model"), "<model repository>");
        assert_eq!(
            redactor.redact("url '/opt/ml/models/affine/model' does not exist"),
            "url '/opt/ml/models/affine/model' does not exist"
        );
        assert_eq!(
            redactor.redact("/opt/ml/model_2/x and /opt/ml/model/x/1/model.py, /opt/ml/model"),
            "/opt/ml/model_2/x and <model repository>/x/1/model.py, <model repository>"
        );
        assert_eq!(
            redactor.redact("'/opt/ml/model': missing; /opt/ml/model.bak"),
            "'<model repository>': missing; /opt/ml/model.bak"
        );
    }

    #[test]
    fn hides_configured_folders_longest_first() {
        let mut redactor = Redactor::default();
        redactor.hide(Path::new("/srv/models"), "<model repository>");
        redactor.hide(Path::new("/srv/models/plugins/"), "<plugins>");
        redactor.hide(Path::new("/"), "<root>");
        assert_eq!(
            redactor.redact(
                "At:\n  /srv/models/add/1/model.py(9): execute; /srv/models/plugins/a.wasm"
            ),
            "At:\n  <model repository>/add/1/model.py(9): execute; <plugins>/a.wasm"
        );
        assert_eq!(redactor.redact("/etc/passwd"), "/etc/passwd");
        assert!(matches!(redactor.redact("no paths"), Cow::Borrowed(_)));
    }
}

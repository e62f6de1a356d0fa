//! What a model artifact may bring into the container, checked before any of it loads.
//!
//! A Triton artifact can carry far more than weights: a python backend model, an execution
//! environment, a backend library the core loads from the model's own folder into the process
//! that serves every model (`libtriton_<backend>.so` is looked for there before the backends
//! folder), custom operation libraries, TorchScript archives of pickles, ensembles reaching any
//! of these. Two things forbid kinds of files:
//! - **SageMaker Secure Mode** (`SAGEMAKER_SECURE_MODE=true`): the controls in
//!   `SAGEMAKER_SECURITY_CONTROLS`, for artifacts the platform does not trust;
//! - **the native-code boundary** (`TRIDENT_ARTIFACT_NATIVE_CODE`): whether an artifact may
//!   bring native code into the serving process. Refused by default on a multi-model endpoint,
//!   where one customer's artifact would otherwise run code beside every other customer's
//!   models; allowed by default on a single-model endpoint, whose one artifact is the
//!   endpoint's owner's (Triton's own behaviour).
//!
//! The unit checked is the whole folder the core is given: a single-model endpoint's
//! repository (every model in it, so an ensemble cannot reach what was not checked) and each
//! multi-model load's artifact. Under a gate, the core never reads that folder itself
//! ([`ArtifactPolicy::prepare`]): a private tree of it is made ([`staging`]), every file of the
//! tree is read once ([`walk`]) and held to the rule table ([`rules::RULES`]), and each model's
//! configuration is replaced by the one trident writes from what it parsed ([`canonical`]).
//! A refusal names each file and what forbids it, and nothing of the artifact loads. Under
//! Secure Mode the untrusted channels are held to the same rules at start: a forbidden file in
//! one refuses every artifact, since a model may read any of them.

pub mod allow_list;
pub mod canonical;
pub mod config_schema;
pub mod controls;
pub mod environment;
pub mod model_config;
pub mod pickle;
mod prepare;
pub mod rules;
pub mod staging;
pub mod text_format;
pub mod walk;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use controls::{Control, Gate};

/// The backends the image itself has: the folders of its backends folder and their files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageBackends {
    /// The backends' names (their folders' names).
    pub names: BTreeSet<String>,
    /// The files in those folders, each with its backend (candidates for a configuration's
    /// `runtime`).
    pub files: BTreeSet<(String, String)>,
}

impl ImageBackends {
    /// The backends installed in `folder` (`<triton home>/backends`), read once at start; none
    /// when it cannot be read.
    pub fn in_folder(folder: &Path) -> ImageBackends {
        let mut image = ImageBackends::default();
        for backend in std::fs::read_dir(folder).into_iter().flatten().flatten() {
            if !backend.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = backend.file_name().to_string_lossy().into_owned();
            for file in std::fs::read_dir(backend.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let file = file.file_name().to_string_lossy().into_owned();
                image.files.insert((name.clone(), file));
            }
            image.names.insert(name);
        }
        image
    }

    /// Whether `name` is one of the image's backends.
    pub fn has_backend(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Whether `runtime` names a file of `backend`'s own folder (a plain file name); with no
    /// backend stated, of any backend's.
    pub fn has_runtime(&self, backend: Option<&str>, runtime: &str) -> bool {
        !runtime.contains('/')
            && self.files.iter().any(|(owner, file)| {
                file == runtime && backend.is_none_or(|backend| backend == owner)
            })
    }
}

/// SageMaker Secure Mode's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureMode {
    /// The controls in force.
    pub controls: BTreeSet<Control>,
    /// The folders whose files are untrusted.
    pub untrusted_channels: Vec<PathBuf>,
    /// The platform's keys: every plugin must be signed with one of them.
    pub plugin_keys: Vec<String>,
    /// Whether every plugin must carry golden cases (`TRIDENT_PLUGIN_REQUIRE_CASES`).
    pub plugin_require_cases: bool,
}

/// Whether an artifact may bring native code into the serving process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NativeCode {
    /// Backend libraries, foreign backends and runtimes, custom operation libraries load.
    Allowed,
    /// They are refused.
    Refused,
}

/// What artifacts may bring, for one endpoint.
#[derive(Debug, Clone)]
pub struct ArtifactPolicy {
    /// Secure Mode, when on.
    pub secure_mode: Option<SecureMode>,
    /// The native-code boundary.
    pub native_code: NativeCode,
    /// The image's backends (set once the Triton installation is known).
    pub image: Arc<ImageBackends>,
    /// A refusal found in the untrusted channels at start, which every artifact meets.
    pub channels_refusal: Option<ArtifactRefusal>,
    /// With sessions on: the idle limit a stateful model whose configuration sets none is
    /// loaded with ([`canonical`]).
    pub idle_limit: Option<Duration>,
    /// The folder private trees are made in ([`staging`]).
    pub staging_dir: PathBuf,
    /// How python models' processes are confined (`TRIDENT_PYTHON_ISOLATION`).
    pub python_isolation: crate::confine::PythonIsolation,
    /// What this host's kernel offers of Landlock (probed at start).
    pub landlock: crate::confine::LandlockSupport,
    /// How the serving process's writes are confined (`TRIDENT_SERVING_ISOLATION`).
    pub serving_isolation: crate::confine::Isolation,
    /// More folders the serving process may write (`TRIDENT_SERVING_WRITABLE`).
    pub serving_writable: Vec<PathBuf>,
    /// Whether the image's python backend starts stubs through trident's launcher.
    pub stub_launcher: bool,
    /// This process's staging area, made on first use.
    staging: Arc<OnceLock<Result<Arc<staging::StagingArea>, String>>>,
}

impl Default for ArtifactPolicy {
    fn default() -> ArtifactPolicy {
        ArtifactPolicy {
            secure_mode: None,
            native_code: NativeCode::Allowed,
            image: Arc::default(),
            channels_refusal: None,
            idle_limit: None,
            staging_dir: std::env::temp_dir(),
            python_isolation: crate::confine::PythonIsolation::BestEffort,
            landlock: crate::confine::LandlockSupport::probe(),
            serving_isolation: crate::confine::Isolation::BestEffort,
            serving_writable: Vec::new(),
            stub_launcher: false,
            staging: Arc::default(),
        }
    }
}

/// What the core is given for an artifact ([`ArtifactPolicy::prepare`]).
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The repository the core reads: the artifact's folder, or its private tree.
    pub repository: PathBuf,
    /// The private tree, when there is one; removed once the last clone is dropped.
    pub staged: Option<Arc<staging::Staged>>,
    /// The names the core serves the artifact's model folders by, but the one a load names
    /// itself: each folder with its private name ([`canonical::private_name`]); empty where
    /// the folders' own names stand (a single-model endpoint).
    pub names: Vec<(String, String)>,
}

impl Prepared {
    /// The core's name mapping for this artifact loaded with `folder` served as `model`.
    pub fn name_mapping(&self, folder: &str, model: &str) -> Vec<(String, String)> {
        let mut mapping = vec![(folder.to_owned(), model.to_owned())];
        mapping.extend(self.names.iter().filter(|(f, _)| f != folder).cloned());
        mapping
    }
}

/// One forbidden file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The file.
    pub path: PathBuf,
    /// What it is ([`rules::Rule::what`]).
    pub what: String,
    /// What forbids it.
    pub gate: Gate,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}, which {} forbids",
            self.path.display(),
            self.what,
            self.gate
        )
    }
}

/// Why an artifact is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArtifactRefusal {
    /// Files that the rules forbid.
    #[error("the model artifact is refused: {}", list(root, findings))]
    Forbidden {
        /// The folder checked.
        root: PathBuf,
        /// What was found, at most [`MAX_FINDINGS`].
        findings: Vec<Finding>,
    },
    /// No private tree could be made for it (the staging folder cannot be written).
    #[error("the model artifact at {} cannot be prepared for loading: {why}", root.display())]
    Unstaged {
        /// The folder.
        root: PathBuf,
        /// Why.
        why: String,
    },
    /// The artifact could not be read through (too many files, too deep, unreadable).
    #[error("the model artifact at {} is refused: it cannot be checked ({why}), and {gate} is in force", root.display())]
    Unchecked {
        /// The folder checked.
        root: PathBuf,
        /// Why it could not be read.
        why: String,
        /// A gate in force.
        gate: Gate,
    },
}

/// The most findings a refusal lists.
pub const MAX_FINDINGS: usize = 8;

/// The findings, each file named inside the artifact (`<artifact>/m/1/lib.so`): a refusal never
/// tells one tenant where artifacts lie on the server.
fn list(root: &Path, findings: &[Finding]) -> String {
    findings
        .iter()
        .map(|finding| {
            let path = match finding.path.strip_prefix(root) {
                Ok(inside) => Path::new(ARTIFACT_LABEL).join(inside),
                Err(_) => finding.path.clone(),
            };
            Finding {
                path,
                ..finding.clone()
            }
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What stands for the artifact's folder in a refusal.
pub const ARTIFACT_LABEL: &str = "<artifact>";

impl ArtifactPolicy {
    /// The gates in force, in the order rules name them.
    pub fn gates(&self) -> BTreeSet<Gate> {
        let mut gates: BTreeSet<Gate> = self
            .secure_mode
            .iter()
            .flat_map(|secure| secure.controls.iter().copied().map(Gate::Secure))
            .collect();
        if self.secure_mode.is_some() {
            gates.insert(Gate::AllowList);
        }
        if self.native_code == NativeCode::Refused {
            gates.insert(Gate::NativeCode);
        }
        gates
    }

    /// Checks the artifact at `root` (a folder) as [`ArtifactPolicy::prepare`] does, keeping
    /// nothing of it. It reads the file system: call it off the serving threads.
    pub fn check(&self, root: &Path) -> Result<(), ArtifactRefusal> {
        self.prepare(root).map(drop)
    }

    /// Checks the untrusted channels (Secure Mode only), keeping the first refusal for every
    /// later [`ArtifactPolicy::check`].
    ///
    /// On a multi-model endpoint, `per_artifact` is its models root: every tenant's download
    /// lies there, and each is checked at its own load, never as a part of a channel. A channel
    /// that is the root or inside it is not checked here; one that holds it is checked but for
    /// it. Otherwise one tenant's refused download (which SageMaker leaves on disk) would
    /// refuse every tenant's load, and every model a restarted serving process restores.
    pub fn check_channels(&mut self, per_artifact: Option<&Path>) {
        let Some(secure) = &self.secure_mode else {
            return;
        };
        let gates = self.gates();
        let root = per_artifact.map(|root| std::fs::canonicalize(root).unwrap_or(root.into()));
        self.channels_refusal = secure.untrusted_channels.iter().find_map(|channel| {
            let Some(root) = &root else {
                return check_folder(channel, &gates, &self.image, None).err();
            };
            let channel = std::fs::canonicalize(channel).unwrap_or(channel.clone());
            if channel.starts_with(root) {
                tracing::info!(
                    channel = %channel.display(),
                    "an untrusted channel within the models root: each artifact in it is checked at its own load"
                );
                return None;
            }
            let excluded = root.starts_with(&channel).then_some(root.as_path());
            check_folder(&channel, &gates, &self.image, excluded).err()
        });
        if let Some(refusal) = &self.channels_refusal {
            tracing::error!(%refusal, "an untrusted channel holds what Secure Mode forbids: no model will load");
        }
    }
}

/// Holds every file under `root` to the rules whose gates are in `gates`, but those under
/// `excluded`.
fn check_folder(
    root: &Path,
    gates: &BTreeSet<Gate>,
    image: &ImageBackends,
    excluded: Option<&Path>,
) -> Result<(), ArtifactRefusal> {
    let Some(&first_gate) = gates.first() else {
        return Ok(());
    };
    let mut entries = walk::walk(root).map_err(|error| ArtifactRefusal::Unchecked {
        root: root.to_path_buf(),
        why: error.0,
        gate: first_gate,
    })?;
    allow_list::mark_raw_data(&mut entries);
    let findings = apply_rules(&entries, gates, image, excluded);
    if findings.is_empty() {
        Ok(())
    } else {
        Err(ArtifactRefusal::Forbidden {
            root: root.to_path_buf(),
            findings,
        })
    }
}

/// The findings of the rules whose gates are in `gates` over `entries`, but those under
/// `excluded`; at most [`MAX_FINDINGS`].
fn apply_rules(
    entries: &[walk::Entry],
    gates: &BTreeSet<Gate>,
    image: &ImageBackends,
    excluded: Option<&Path>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let kept = entries
        .iter()
        .filter(|entry| excluded.is_none_or(|excluded| !entry.path.starts_with(excluded)));
    let allow_list = gates.contains(&Gate::AllowList);
    for entry in kept {
        let found = rules::RULES.iter().find_map(|rule| {
            let &gate = rule.gates.iter().find(|g| gates.contains(g))?;
            (rule.finds)(entry, image).then(|| {
                let what = match (&entry.unreadable, rule.what) {
                    (Some(why), "cannot be checked") => format!("cannot be checked ({why})"),
                    _ => rule.what.to_owned(),
                };
                (what, gate)
            })
        });
        let found = found.or_else(|| {
            let what = allow_list.then(|| allow_list::refusal(entry))??;
            Some((what, Gate::AllowList))
        });
        if let Some((what, gate)) = found {
            findings.push(Finding {
                path: entry.path.clone(),
                what,
                gate,
            });
        }
        if findings.len() == MAX_FINDINGS {
            break;
        }
    }
    findings
}

#[cfg(test)]
mod tests;

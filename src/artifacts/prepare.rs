//! [`ArtifactPolicy::prepare`]: what the core reads for an artifact, made and checked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{
    ArtifactPolicy, ArtifactRefusal, Finding, Gate, MAX_FINDINGS, Prepared, apply_rules, canonical,
    environment, model_config, staging, text_format, walk,
};

impl ArtifactPolicy {
    /// What the core is to read for the artifact at `root` (a folder), or why it is refused.
    /// It reads the file system, and may link or copy the artifact: call it off the serving
    /// threads.
    /// - Under a gate: the artifact's private tree, checked, with the configurations trident
    ///   wrote ([`canonical`]) and its folders read-only.
    /// - Without one: the artifact's own folder; or, when a stateful model's idle limit must
    ///   be raised, a tree of links to it with that model's configuration rewritten.
    pub fn prepare(&self, root: &Path) -> Result<Prepared, ArtifactRefusal> {
        self.prepare_named(root, None)
    }

    /// [`ArtifactPolicy::prepare`] for the model `name` of a multi-model endpoint: a tree it
    /// needs is made at the name's one path ([`staging::StagingArea::stage_as`]). Call it only
    /// while `name` is reserved for this load.
    pub fn prepare_as(&self, root: &Path, name: &str) -> Result<Prepared, ArtifactRefusal> {
        self.prepare_named(root, Some(name))
    }

    fn prepare_named(&self, root: &Path, name: Option<&str>) -> Result<Prepared, ArtifactRefusal> {
        if let Some(refusal) = &self.channels_refusal {
            return Err(refusal.clone());
        }
        let gates = self.gates();
        // A multi-model load's step models go by names private to it.
        let token = name.map(|_| hex::encode(rand::random::<[u8; 8]>()));
        let mut prepared = match gates.first() {
            Some(&gate) => self.prepare_private(root, &gates, gate, name, token.as_deref()),
            None => self.prepare_ungated(root, name, token.as_deref()),
        }?;
        if let Some(token) = &token {
            prepared.names = folders_in(&prepared.repository, true)
                .into_iter()
                .map(|folder| {
                    let private = canonical::private_name(&folder, token);
                    (folder, private)
                })
                .collect();
        }
        Ok(prepared)
    }

    /// A tree of `root` in `shape`, at `name`'s path when given.
    fn stage(
        &self,
        root: &Path,
        shape: staging::Shape,
        rewritten: &[String],
        name: Option<&str>,
    ) -> Result<staging::Staged, String> {
        let area = self.area()?;
        match name {
            Some(name) => area.stage_as(root, shape, rewritten, name),
            None => area.stage(root, shape, rewritten),
        }
    }

    fn area(&self) -> Result<&staging::StagingArea, String> {
        self.staging
            .get_or_init(|| staging::StagingArea::for_process(&self.staging_dir))
            .as_deref()
            .map_err(Clone::clone)
    }

    /// The private tree of `root`, checked and with canonical configurations.
    fn prepare_private(
        &self,
        root: &Path,
        gates: &BTreeSet<Gate>,
        gate: Gate,
        name: Option<&str>,
        token: Option<&str>,
    ) -> Result<Prepared, ArtifactRefusal> {
        let unchecked = |why: String| ArtifactRefusal::Unchecked {
            root: root.to_path_buf(),
            why,
            gate,
        };
        let staged = self
            .stage(root, staging::Shape::Private, &[], name)
            .map_err(unchecked)?;
        let mut entries = walk::walk(&staged.root).map_err(|e| unchecked(e.0))?;
        let canonicalize = canonical::Canonicalize {
            gated: true,
            idle_limit: self.idle_limit,
            private_token: token,
        };
        let mut problems = Vec::new();
        let folders = model_folders(&staged.root);
        let models: BTreeSet<String> = folders.iter().cloned().collect();
        let mut added = Vec::new();
        for folder in folders {
            let written = canonical_config(
                &canonicalize,
                (&staged.root, &models),
                &folder,
                &mut entries,
                &mut added,
            );
            match written {
                Ok(Some(text)) => staged.write_config(&folder, &text).map_err(unchecked)?,
                Ok(None) => {
                    // Not a model: the core could only guess at it, so it does not see it.
                    let path = staged.root.join(&folder);
                    std::fs::remove_dir_all(&path)
                        .map_err(|e| unchecked(format!("cannot leave out {folder}: {e}")))?;
                    tracing::info!(folder = %staged.original_path(&path).display(),
                        "a folder with neither config.pbtxt nor a model file is not given to the core");
                }
                Err(found) => problems.extend(found.into_iter().map(|what| Finding {
                    path: staged.root.join(&folder).join("config.pbtxt"),
                    what,
                    gate,
                })),
            }
        }
        entries.extend(added);
        super::allow_list::mark_raw_data(&mut entries);
        problems.extend(self.unconfinable_python(&staged.root, &models));
        // The files first: they say most about what the artifact is.
        let mut findings = apply_rules(&entries, gates, &self.image, None);
        findings.extend(problems);
        findings.truncate(MAX_FINDINGS);
        if !findings.is_empty() {
            for finding in &mut findings {
                finding.path = staged.original_path(&finding.path);
            }
            return Err(ArtifactRefusal::Forbidden {
                root: root.to_path_buf(),
                findings,
            });
        }
        staged.seal().map_err(unchecked)?;
        Ok(Prepared {
            repository: staged.root.clone(),
            staged: Some(Arc::new(staged)),
            names: Vec::new(),
        })
    }

    /// The python models among `folders` of `root` when this host cannot confine them and the
    /// setting requires it (`TRIDENT_PYTHON_ISOLATION`, [`crate::confine`]).
    fn unconfinable_python(&self, root: &Path, folders: &BTreeSet<String>) -> Vec<Finding> {
        let Some(why) = self
            .python_isolation
            .refusal(self.landlock, self.stub_launcher)
        else {
            return Vec::new();
        };
        folders
            .iter()
            .map(|folder| root.join(folder))
            .filter(|folder| is_python_model(folder))
            .map(|folder| Finding {
                path: folder.join("config.pbtxt"),
                what: format!("configures a python model, and {why}"),
                gate: Gate::PythonIsolation,
            })
            .collect()
    }

    /// `root` itself, or a tree of links to it where a stateful model's idle limit must be
    /// raised; refused only when an execution environment would unpack outside its folder
    /// ([`environment`]).
    fn prepare_ungated(
        &self,
        root: &Path,
        name: Option<&str>,
        token: Option<&str>,
    ) -> Result<Prepared, ArtifactRefusal> {
        let canonicalize = canonical::Canonicalize {
            gated: false,
            idle_limit: self.idle_limit,
            private_token: token,
        };
        let folders: BTreeSet<String> = model_folders(root).into_iter().collect();
        let mut rewritten = Vec::new();
        let mut environments = Vec::new();
        let mut findings = Vec::new();
        for folder in model_folders(root) {
            let path = root.join(&folder).join("config.pbtxt");
            // A configuration that cannot be read is the core's to refuse, as it would be.
            let Ok(bytes) = crate::files::read_regular(&path, walk::MAX_CONFIG_BYTES) else {
                continue;
            };
            let Ok(mut config) = text_format::parse(&bytes) else {
                continue;
            };
            let facts = model_config::ModelConfigFacts::of(&config);
            // An environment is unpacked by trident into the private tree, and the core told
            // to use that folder: the backend never unpacks one.
            let environment = facts
                .parameters
                .get("EXECUTION_ENV_PATH")
                .and_then(|value| environment::archive_path(value, &root.join(&folder)))
                .map(|archive| environment_of(archive, &mut config));
            let written = matches!(environment, Some(Ok(_))).then(|| config.clone());
            match environment {
                Some(Ok(archive)) => environments.push((folder.clone(), archive)),
                Some(Err(finding)) => findings.push(finding),
                None => {}
            }
            let none = BTreeSet::new();
            let folder_facts = canonical::ModelFolder {
                name: &folder,
                model_files: &none,
                file_names: &none,
                artifact_models: &folders,
            };
            match canonicalize.config(Some(config), folder_facts) {
                Ok(Some(config)) => rewritten.push((folder, config.write())),
                _ => rewritten.extend(written.map(|config| (folder, config.write()))),
            }
        }
        findings.extend(self.unconfinable_python(root, &folders));
        if !findings.is_empty() {
            return Err(ArtifactRefusal::Forbidden {
                root: root.to_path_buf(),
                findings,
            });
        }
        if rewritten.is_empty() {
            return Ok(Prepared {
                repository: root.to_path_buf(),
                staged: None,
                names: Vec::new(),
            });
        }
        let unstaged = |why: String| ArtifactRefusal::Unstaged {
            root: root.to_path_buf(),
            why,
        };
        let names: Vec<String> = rewritten.iter().map(|(name, _)| name.clone()).collect();
        let staged = self
            .stage(root, staging::Shape::Linked, &names, name)
            .map_err(unstaged)?;
        for (folder, text) in &rewritten {
            staged.write_config(folder, text).map_err(unstaged)?;
        }
        unpack_environments(root, &staged, &environments)?;
        tracing::info!(repository = %root.display(), models = ?names,
            "models load with configurations trident rewrote (an idle limit raised past the \
             sessions' expiration, ensemble steps by their private names, execution \
             environments unpacked by trident)");
        Ok(Prepared {
            repository: staged.root.clone(),
            staged: Some(Arc::new(staged)),
            names: Vec::new(),
        })
    }
}

/// The execution environment `archive` of a model whose configuration is `config`, checked,
/// with the configuration pointed at the folder it will be unpacked into; or why it is refused.
/// Only a model whose configuration is rewritten has its folder made anew in the tree, so only
/// there is an environment unpacked.
fn environment_of(archive: PathBuf, config: &mut text_format::Message) -> Result<PathBuf, Finding> {
    let refused = |archive: PathBuf, what: String| Finding {
        path: archive,
        what: format!("is an execution environment that {what}"),
        gate: Gate::Always,
    };
    environment::check_archive(&archive).map_err(|what| refused(archive.clone(), what))?;
    if environment::point_at_unpacked(config) {
        Ok(archive)
    } else {
        Err(refused(
            archive,
            "EXECUTION_ENV_PATH names in no value trident can rewrite".to_owned(),
        ))
    }
}

/// Unpacks each model's execution environment into its folder of the tree `staged`.
fn unpack_environments(
    root: &Path,
    staged: &staging::Staged,
    environments: &[(String, PathBuf)],
) -> Result<(), ArtifactRefusal> {
    for (folder, archive) in environments {
        let into = staged.root.join(folder).join(environment::UNPACKED);
        match environment::unpack(archive, &into) {
            Ok(()) => {}
            Err(environment::UnpackError::Refused(what)) => {
                return Err(ArtifactRefusal::Forbidden {
                    root: root.to_path_buf(),
                    findings: vec![Finding {
                        path: archive.clone(),
                        what: format!("is an execution environment that {what}"),
                        gate: Gate::Always,
                    }],
                });
            }
            Err(environment::UnpackError::Failed(why)) => {
                return Err(ArtifactRefusal::Unstaged {
                    root: root.to_path_buf(),
                    why,
                });
            }
        }
    }
    Ok(())
}

/// The folders directly in `root` (the models of a repository), by name.
fn model_folders(root: &Path) -> Vec<String> {
    folders_in(root, false)
}

/// The folders directly in `root`, by name; with `through_links`, links to folders too (a
/// linked tree's folders that trident did not rewrite are links to the artifact's).
fn folders_in(root: &Path, through_links: bool) -> Vec<String> {
    let mut folders: Vec<String> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|item| match through_links {
            true => item.path().is_dir(),
            false => item.file_type().is_ok_and(|t| t.is_dir()),
        })
        .filter_map(|item| item.file_name().into_string().ok())
        .collect();
    folders.sort();
    folders
}

/// The canonical configuration of model `folder` of the tree at `root`, whose model folders are
/// `models`, from its entries (sorted by path, as [`walk::walk`] gives them); the rules then
/// see what it says (an entry for it goes to `added` when the folder had none). `Ok(None)`:
/// the folder has neither a configuration nor a model file, and is not a model.
fn canonical_config(
    canonicalize: &canonical::Canonicalize,
    (root, models): (&Path, &BTreeSet<String>),
    folder: &str,
    entries: &mut [walk::Entry],
    added: &mut Vec<walk::Entry>,
) -> Result<Option<String>, Vec<String>> {
    let base = root.join(folder);
    let config_path = base.join("config.pbtxt");
    // The folder's entries are one run of the sorted list: found, not scanned for.
    let start = entries.partition_point(|e| e.path < base);
    let length = entries[start..].partition_point(|e| e.path.starts_with(&base));
    let range = start..start + length;
    let (mut model_files, mut file_names) = (BTreeSet::new(), BTreeSet::new());
    for entry in &entries[range.clone()] {
        let Ok(inside) = entry.path.strip_prefix(&base) else {
            continue;
        };
        file_names.insert(entry.name.clone());
        let mut parts = inside.components().map(|c| c.as_os_str().to_string_lossy());
        if let (Some(version), Some(first)) = (parts.next(), parts.next())
            && !version.is_empty()
            && version.bytes().all(|b| b.is_ascii_digit())
        {
            model_files.insert(first.to_lowercase());
        }
    }
    let index = entries[range.clone()]
        .iter()
        .position(|e| e.path == config_path)
        .map(|i| range.start + i);
    if index.is_none() && !canonical::names_a_backend(&model_files) {
        return Ok(None);
    }
    if index.is_some_and(|i| entries[i].unreadable.is_some()) {
        // The rules refuse it under every gate, naming why.
        return Err(Vec::new());
    }
    let tree = index.and_then(|i| entries[i].config_tree.clone());
    let config = canonicalize
        .config(
            tree,
            canonical::ModelFolder {
                name: folder,
                model_files: &model_files,
                file_names: &file_names,
                artifact_models: models,
            },
        )?
        .unwrap_or_default();
    let facts = model_config::ModelConfigFacts::of(&config);
    match index {
        Some(i) => entries[i].config = Some(facts),
        None => added.push(walk::Entry {
            path: config_path,
            name: "config.pbtxt".into(),
            config: Some(facts),
            ..walk::Entry::default()
        }),
    }
    Ok(Some(config.write()))
}

/// Whether the model folder `folder` is a python model: its configuration names the python
/// backend, or a version folder holds a `model.py` (from which the core would guess it).
fn is_python_model(folder: &Path) -> bool {
    let configured =
        crate::files::read_regular(&folder.join("config.pbtxt"), walk::MAX_CONFIG_BYTES)
            .ok()
            .and_then(|bytes| text_format::parse(&bytes).ok())
            .is_some_and(|config| {
                model_config::ModelConfigFacts::of(&config)
                    .backend
                    .as_deref()
                    == Some("python")
            });
    configured
        || std::fs::read_dir(folder)
            .into_iter()
            .flatten()
            .flatten()
            .take(1024)
            .any(|version| version.path().join("model.py").exists())
}

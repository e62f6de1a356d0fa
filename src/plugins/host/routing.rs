//! Which plugins serve a request: a model's adapters (its own entry in the manifest, else `*`),
//! one arm or weighted A/B variants, checked at load to export the hooks their role calls, and
//! the model's shadow when the request is in its sample; the OOM policy and OpenAI's chat route
//! by name.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::plugins::platform::manifest::{Manifest, ModelPlugins};
use crate::plugins::platform::plugin::{LoadError, LoadedPlugin, refuse_unless};
use crate::plugins::platform::shadow::Shadow;
use crate::plugins::platform::variants::{Weighted, choose};

/// The adapters chosen for one request.
#[derive(Clone, Default)]
pub struct Selection {
    /// The A/B variant, when the model has variants.
    pub variant: Option<String>,
    /// The request adapter, if the model (or its variant) has one.
    pub request: Option<Arc<LoadedPlugin>>,
    /// The response adapter, if the model (or its variant) has one.
    pub response: Option<Arc<LoadedPlugin>>,
    /// The pipeline that answers the request whole, if the model (or its variant) has one
    /// (then it has no adapters).
    pub pipeline: Option<Arc<LoadedPlugin>>,
    /// The model's shadow, when it has one and this request is in its sample.
    pub shadow: Option<Arc<Shadow>>,
}

/// One arm: the adapters of a model, or of one of its variants.
#[derive(Clone)]
struct Arm {
    request: Option<Arc<LoadedPlugin>>,
    response: Option<Arc<LoadedPlugin>>,
    pipeline: Option<Arc<LoadedPlugin>>,
}

/// How a model's requests reach its adapters.
enum Routing {
    Single(Arm),
    Variants {
        weights: Vec<Weighted>,
        arms: Vec<Arm>,
    },
}

/// The plugin the manifest names for a role, refused when it does not export what the role
/// calls.
fn named(
    plugin: Option<Arc<LoadedPlugin>>,
    exports: impl Fn(&LoadedPlugin) -> bool,
    role: &str,
    hook: &str,
) -> Result<Option<Arc<LoadedPlugin>>, LoadError> {
    match plugin {
        Some(plugin) if !exports(&plugin) => Err(LoadError {
            plugin: plugin.name.to_string(),
            message: format!("named as {role} but does not export {hook}"),
        }),
        plugin => Ok(plugin),
    }
}

/// How a model's requests reach its adapters: one arm, or weighted variants.
fn routing(
    model: &str,
    spec: &ModelPlugins,
    get: impl Fn(&Option<String>) -> Option<Arc<LoadedPlugin>>,
) -> Result<Routing, LoadError> {
    if spec.variants.is_empty() {
        let arm = Arm {
            request: get(&spec.request),
            response: get(&spec.response),
            pipeline: get(&spec.pipeline),
        };
        check_arm(model, &arm)?;
        return Ok(Routing::Single(arm));
    }
    let mut arms = Vec::new();
    for variant in &spec.variants {
        let arm = Arm {
            request: get(&variant.request),
            response: get(&variant.response),
            pipeline: get(&variant.pipeline),
        };
        check_arm(model, &arm)?;
        arms.push(arm);
    }
    let weights = spec
        .variants
        .iter()
        .map(|v| Weighted {
            name: v.name.clone(),
            weight: v.weight,
        })
        .collect();
    Ok(Routing::Variants { weights, arms })
}

/// Each plugin of an arm exports the hook the arm uses it for.
fn check_arm(model: &str, arm: &Arm) -> Result<(), LoadError> {
    let roles = [
        (
            &arm.request,
            "request adapter",
            arm.request
                .as_ref()
                .is_none_or(|p| p.hooks.request.is_some() || p.hooks.generate_request.is_some()),
        ),
        (
            &arm.response,
            "response adapter",
            arm.response.as_ref().is_none_or(|p| {
                p.hooks.response.is_some()
                    || p.hooks.generate_response.is_some()
                    || p.hooks.stream.is_some()
            }),
        ),
        (
            &arm.pipeline,
            "pipeline",
            arm.pipeline
                .as_ref()
                .is_none_or(|p| p.hooks.pipeline.is_some()),
        ),
    ];
    for (plugin, role, exported) in roles {
        refuse_unless(
            plugin,
            exported,
            format!("model '{model}' uses it as a {role}, which it does not export"),
        )?;
    }
    Ok(())
}

/// Which plugins serve what: each model's adapters, the OOM policy, the chat route's plugin.
pub struct Routes {
    models: BTreeMap<String, Routing>,
    shadows: BTreeMap<String, Arc<Shadow>>,
    oom: Option<Arc<LoadedPlugin>>,
    openai_chat: Option<Arc<LoadedPlugin>>,
    /// Requests selected so far (spreads variants for requests without an inference id).
    requests: AtomicU64,
}

impl Routes {
    /// The routes `manifest` names among `plugins`, each checked to export the hooks its role
    /// calls.
    pub fn of(
        manifest: &Manifest,
        plugins: &BTreeMap<String, Arc<LoadedPlugin>>,
    ) -> Result<Routes, LoadError> {
        let get = |name: &Option<String>| name.as_ref().map(|n| Arc::clone(&plugins[n]));
        let mut models = BTreeMap::new();
        let mut shadows = BTreeMap::new();
        for (model, spec) in &manifest.models {
            models.insert(model.clone(), routing(model, spec, get)?);
            if let Some(shadow) = &spec.shadow {
                shadows.insert(model.clone(), Arc::new(Shadow::of(model, shadow, get)?));
            }
        }
        let oom = named(
            get(&manifest.oom),
            |p| p.hooks.oom.is_some(),
            "the oom policy",
            "oom-classifier",
        )?;
        let openai_chat = named(
            get(&manifest.openai_chat),
            LoadedPlugin::adapts_generate_requests,
            "the openai_chat plugin",
            "generate-request-adapter",
        )?;
        Ok(Routes {
            models,
            shadows,
            oom,
            openai_chat,
            requests: AtomicU64::new(0),
        })
    }

    /// Every model entry's shadow.
    pub fn shadows(&self) -> impl Iterator<Item = &Arc<Shadow>> {
        self.shadows.values()
    }

    /// The models with adapters of their own (`*` for every other).
    pub fn models(&self) -> impl Iterator<Item = &String> {
        self.models.keys()
    }

    /// The OOM policy's plugin, when the manifest names one.
    pub fn oom(&self) -> Option<&Arc<LoadedPlugin>> {
        self.oom.as_ref()
    }

    /// The adapters for a request to `model` (its own entry, else `*`), choosing a variant when
    /// the model has several.
    pub fn select(
        &self,
        model: &str,
        target_variant: Option<&str>,
        inference_id: Option<&str>,
    ) -> Option<Selection> {
        let (entry, routing) = self
            .models
            .get_key_value(model)
            .or_else(|| self.models.get_key_value("*"))?;
        let shadow = self
            .shadows
            .get(entry)
            .filter(|shadow| shadow.sampled(inference_id))
            .cloned();
        Some(match routing {
            Routing::Single(arm) => Selection {
                variant: None,
                request: arm.request.clone(),
                response: arm.response.clone(),
                pipeline: arm.pipeline.clone(),
                shadow,
            },
            Routing::Variants { weights, arms } => {
                // A cheap, well-spread sequence for requests without an inference id.
                let random = self
                    .requests
                    .fetch_add(1, Ordering::Relaxed)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let index = choose(weights, target_variant, inference_id, random >> 11);
                Selection {
                    variant: Some(weights[index].name.clone()),
                    request: arms[index].request.clone(),
                    response: arms[index].response.clone(),
                    pipeline: arms[index].pipeline.clone(),
                    shadow,
                }
            }
        })
    }

    /// Every adapter that may serve a request to `model` (every arm's, each plugin once, by
    /// name).
    pub fn adapters_of(&self, model: &str) -> Vec<Arc<LoadedPlugin>> {
        let Some(routing) = self.models.get(model).or_else(|| self.models.get("*")) else {
            return Vec::new();
        };
        let arms = match routing {
            Routing::Single(arm) => std::slice::from_ref(arm),
            Routing::Variants { arms, .. } => arms.as_slice(),
        };
        let mut adapters: BTreeMap<&str, Arc<LoadedPlugin>> = BTreeMap::new();
        for plugin in arms
            .iter()
            .flat_map(|arm| [&arm.request, &arm.response, &arm.pipeline])
            .flatten()
        {
            adapters.insert(&plugin.name, Arc::clone(plugin));
        }
        adapters.into_values().collect()
    }

    /// The adapters of OpenAI's chat completions route: the `openai_chat` plugin for the
    /// request and the answer, or `None` when the manifest names none.
    pub fn openai_chat(&self) -> Option<Selection> {
        let plugin = self.openai_chat.as_ref()?;
        Some(Selection {
            variant: None,
            request: Some(Arc::clone(plugin)),
            response: Some(Arc::clone(plugin)),
            pipeline: None,
            shadow: None,
        })
    }
}

//! The plugin host: every plugin of a manifest, ready to call (loaded by `loading`, chosen by
//! `routing`), and the calls into them (`hooks`: one table of the worlds a plugin exports and
//! one way to call any of them; `generate`: version 0.2.0's hooks). Every call runs in a fresh
//! instance in a new limited store (made ahead of time, [`crate::plugins::runtime::warm`]), so no state survives
//! from one request to the next.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::plugins::host::model_plugins::ModelPluginPolicy;
use crate::plugins::host::routing::{Routes, Selection};
use crate::plugins::platform::accounting::Hook;
use crate::plugins::platform::loading::{Compiled, Loaded, load_plugins};
use crate::plugins::platform::manifest::Manifest;
use crate::plugins::platform::plugin::{LoadError, LoadedPlugin};
use crate::plugins::runtime::boundary::{
    AdaptedRequest, HookResult, PluginInvocation, PluginReply, converted,
};
use crate::plugins::runtime::engine::{Pool, Runtime};
use crate::plugins::wit::convert;

mod call;
pub mod cases;
mod generate;
pub mod model_plugins;
pub mod routing;
pub mod secure_mode;
pub mod shadow;

use crate::engine::InferResponse;
use crate::plugins::wit::bindings::request::exports::trident::plugin::request_adapter::Adapted;
use crate::plugins::wit::bindings::response::exports::trident::plugin::response_adapter::InferenceResult;

/// Every plugin of a manifest, ready to call.
pub struct PluginHost {
    runtime: Runtime,
    plugins: BTreeMap<String, Arc<LoadedPlugin>>,
    routes: Routes,
    compiled: Compiled,
    footprint: u64,
    model_policy: ModelPluginPolicy,
}

impl std::fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHost")
            .field("plugins", &self.plugins.keys().collect::<Vec<_>>())
            .field("models", &self.routes.models().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl PluginHost {
    /// Loads every plugin of the container's `manifest` ([`load_plugins`]) and the routes it
    /// names among them, and runs their golden cases ([`cases::gate`]). Any failure
    /// refuses the whole manifest.
    pub async fn load(manifest: &Manifest) -> Result<PluginHost, LoadError> {
        PluginHost::load_in(manifest, Pool::Container).await
    }

    /// [`PluginHost::load`], in an engine whose pool is sized for `pool`.
    pub async fn load_in(manifest: &Manifest, pool: Pool) -> Result<PluginHost, LoadError> {
        let host = PluginHost::load_without_cases(manifest, pool).await?;
        // No plugin serves before its golden cases pass.
        cases::gate(&host).await?;
        Ok(host)
    }

    /// Loads `manifest` as [`PluginHost::load`] does (its cases read and verified with its
    /// other files) without running the cases: for `trident plugin test`, which runs every case
    /// and reports them all.
    pub async fn load_untested(manifest: &Manifest) -> Result<PluginHost, LoadError> {
        PluginHost::load_without_cases(manifest, Pool::Container).await
    }

    async fn load_without_cases(manifest: &Manifest, pool: Pool) -> Result<PluginHost, LoadError> {
        let Loaded {
            runtime,
            plugins,
            compiled,
            footprint,
        } = load_plugins(manifest, pool).await?;
        let routes = Routes::of(manifest, &plugins)?;
        Ok(PluginHost {
            runtime,
            plugins,
            routes,
            compiled,
            footprint,
            model_policy: ModelPluginPolicy::of(manifest),
        })
    }

    /// The adapters for a request to `model` (its own entry, else `*`), choosing a variant when
    /// the model has several.
    pub fn select(
        &self,
        model: &str,
        target_variant: Option<&str>,
        inference_id: Option<&str>,
    ) -> Option<Selection> {
        self.routes.select(model, target_variant, inference_id)
    }

    /// The adapters of OpenAI's chat completions route, or `None` when the manifest names none.
    pub fn openai_chat(&self) -> Option<Selection> {
        self.routes.openai_chat()
    }

    /// What this (the container's) manifest lets model artifacts' own plugins do.
    pub fn model_policy(&self) -> &ModelPluginPolicy {
        &self.model_policy
    }

    /// How many of the plugins were read from the compile cache and how many compiled.
    pub fn compiled(&self) -> Compiled {
        self.compiled
    }

    /// What the plugins hold in the process, in bytes ([`crate::plugins::platform::loading::footprint`]).
    pub fn footprint_bytes(&self) -> u64 {
        self.footprint
    }

    /// Checks `model` (named `name`, its KServe v2 metadata) with every adapter routed to it
    /// that exports `model-check` ([`crate::plugins::platform::model_check`]); the first refusal, naming the
    /// plugin and the model.
    pub async fn check_model(
        &self,
        name: &str,
        metadata: &serde_json::Value,
    ) -> Result<(), String> {
        for plugin in self.routes.adapters_of(name) {
            if plugin.checks_models() {
                let model = crate::plugins::platform::model_check::model_info(name, metadata);
                crate::plugins::platform::model_check::check(&self.runtime, &plugin, model).await?;
            }
        }
        Ok(())
    }

    /// Every model a plugin may call (`trident:models`), with the plugin: `(plugin, model)`.
    pub fn called_models(&self) -> impl Iterator<Item = (&str, &str)> {
        self.plugins.values().flat_map(|plugin| {
            plugin
                .limits
                .models
                .models
                .iter()
                .map(move |model| (&*plugin.name, model.as_str()))
        })
    }

    /// The loaded plugins, by name.
    pub fn plugins(&self) -> impl Iterator<Item = &Arc<LoadedPlugin>> {
        self.plugins.values()
    }

    /// Goes on counting where `earlier` (the host this one replaces at a reload) left off:
    /// each plugin loaded again unchanged keeps its account, and each shadow comparing the
    /// same candidates at the same sample its verdicts. Call it before this host serves.
    pub fn continue_from(&self, earlier: &PluginHost) {
        for plugin in self.plugins() {
            if let Some(before) = earlier.plugins.get(&*plugin.name) {
                plugin.continue_from(before);
            }
        }
        let same = |a: &Option<Arc<LoadedPlugin>>, b: &Option<Arc<LoadedPlugin>>| match (a, b) {
            (Some(a), Some(b)) => a.same_as(b),
            (None, None) => true,
            _ => false,
        };
        for shadow in self.shadows() {
            if let Some(before) = earlier.shadows().find(|s| s.model == shadow.model) {
                shadow.continue_from(before, same);
            }
        }
    }

    /// Calls a request adapter.
    pub async fn adapt_request(
        &self,
        plugin: &Arc<LoadedPlugin>,
        invocation: &PluginInvocation,
    ) -> HookResult<AdaptedRequest> {
        let (session, max_batch) = (invocation.session.clone(), invocation.max_batch);
        let models = invocation.models.clone();
        let invocation = Arc::clone(&invocation.wit);
        let adapted = self
            .call(
                plugin,
                call::Kept {
                    max_batch,
                    models,
                    ..call::Kept::session(session)
                },
                Hook::Request,
                |hooks| hooks.request.as_ref(),
                move |instance, store| {
                    Box::pin(async move {
                        instance
                            .trident_plugin_request_adapter()
                            .call_adapt_request(store, &invocation)
                            .await
                    })
                },
            )
            .await;
        converted(adapted, |adapted| match adapted {
            Adapted::Tensors(tensors) => AdaptedRequest::Tensors {
                inputs: tensors
                    .inputs
                    .into_iter()
                    .map(convert::input_from_wit)
                    .collect(),
                outputs: tensors.outputs,
            },
            Adapted::V2Json(json) => AdaptedRequest::V2Json(json),
        })
    }

    /// Calls a response adapter with the model's `response`.
    pub async fn adapt_response(
        &self,
        plugin: &Arc<LoadedPlugin>,
        invocation: &PluginInvocation,
        response: &InferResponse,
    ) -> HookResult<PluginReply> {
        let (session, models) = (invocation.session.clone(), invocation.models.clone());
        let invocation = Arc::clone(&invocation.wit);
        let result = InferenceResult {
            model_name: response.model_name.clone(),
            model_version: response.model_version.to_string(),
            outputs: convert::outputs_to_wit(&response.outputs),
        };
        let reply = self
            .call(
                plugin,
                call::Kept {
                    models,
                    ..call::Kept::session(session)
                },
                Hook::Response,
                |hooks| hooks.response.as_ref(),
                move |instance, store| {
                    Box::pin(async move {
                        instance
                            .trident_plugin_response_adapter()
                            .call_adapt_response(store, &invocation, &result)
                            .await
                    })
                },
            )
            .await;
        converted(reply, PluginReply::from)
    }

    /// Calls a pipeline: the request answered whole by the plugin, its model calls answered by
    /// the invocation's caller.
    pub async fn handle(
        &self,
        plugin: &Arc<LoadedPlugin>,
        invocation: &PluginInvocation,
    ) -> HookResult<PluginReply> {
        let (session, models) = (invocation.session.clone(), invocation.models.clone());
        let invocation = Arc::clone(&invocation.wit);
        let reply = self
            .call(
                plugin,
                call::Kept {
                    models,
                    ..call::Kept::session(session)
                },
                Hook::Pipeline,
                |hooks| hooks.pipeline.as_ref(),
                move |instance, store| {
                    Box::pin(async move {
                        instance
                            .trident_models_pipeline()
                            .call_handle(store, &invocation)
                            .await
                    })
                },
            )
            .await;
        converted(reply, PluginReply::from)
    }

    /// The configured OOM policy's verdict on an engine error message; `None` when no OOM
    /// plugin is configured or it failed (the caller then uses the built-in list).
    pub async fn is_out_of_memory(&self, message: &str) -> Option<bool> {
        let plugin = self.routes.oom()?;
        plugin.hooks.oom.as_ref()?;
        match self.classify_oom(plugin, message).await {
            Ok(verdict) => Some(verdict),
            Err(error) => {
                tracing::warn!(%error, "the OOM plugin failed; using the built-in list");
                None
            }
        }
    }

    /// Calls an OOM classifier (`plugin`, which exports it) on an engine error `message`.
    pub async fn classify_oom(
        &self,
        plugin: &Arc<LoadedPlugin>,
        message: &str,
    ) -> Result<bool, super::CallFailure> {
        let message = message.to_owned();
        self.call(
            plugin,
            call::Kept::default(),
            Hook::Oom,
            |hooks| hooks.oom.as_ref(),
            move |instance, store| {
                Box::pin(async move {
                    instance
                        .trident_plugin_oom_classifier()
                        .call_is_out_of_memory(store, &message)
                        .await
                })
            },
        )
        .await
    }
}

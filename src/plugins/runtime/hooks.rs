//! A plugin's hooks as data: one table of the worlds it exports (`Hooks`), each with the
//! instances ready for its calls, and what every world shares: the plugin's configuration
//! check. The one way to call any hook is `host::call`.

use futures_util::future::BoxFuture;
use wasmtime::Engine;
use wasmtime::component::InstancePre;

use super::store::CallFailure;
use super::store::{Limits, PluginState};
use super::warm::{Prepare, Warm};
use crate::plugins::wit::bindings::{
    generate_request, generate_response, oom, pipeline, request, response, stream,
};

/// For each world trident defines, the plugin's pre-instance of it and the instances ready for
/// calls; `None` where the plugin does not export the world.
pub(in crate::plugins) struct Hooks {
    /// `request-adapter` (0.1.0).
    pub(in crate::plugins) request: Option<Warm<request::RequestAdapterPluginPre<PluginState>>>,
    /// `response-adapter` (0.1.0).
    pub(in crate::plugins) response: Option<Warm<response::ResponseAdapterPluginPre<PluginState>>>,
    /// `oom-classifier` (0.1.0).
    pub(in crate::plugins) oom: Option<Warm<oom::OomPluginPre<PluginState>>>,
    /// `generate-request-adapter` (0.2.0).
    pub(in crate::plugins) generate_request:
        Option<Warm<generate_request::GenerateRequestAdapterPluginPre<PluginState>>>,
    /// `generate-response-adapter` (0.2.0).
    pub(in crate::plugins) generate_response:
        Option<Warm<generate_response::GenerateResponseAdapterPluginPre<PluginState>>>,
    /// `stream-adapter` (0.2.0).
    pub(in crate::plugins) stream: Option<Warm<stream::StreamAdapterPluginPre<PluginState>>>,
    /// `pipeline` (`trident:models@0.1.0`).
    pub(in crate::plugins) pipeline: Option<Warm<pipeline::PipelinePluginPre<PluginState>>>,
}

/// The message of a plugin that exports none of the worlds.
pub(in crate::plugins) const EXPORTS_NONE: &str = "exports none of trident's hooks (0.1.0: request-adapter, \
     response-adapter, oom-classifier; 0.2.0: generate-request-adapter, \
     generate-response-adapter, stream-adapter; trident:models 0.1.0: pipeline)";

impl Hooks {
    /// The worlds `pre` (a compiled plugin, its imports linked) exports; `init_each`: every
    /// instance runs `check-config` when it is made ([`Warm::new`]).
    pub(in crate::plugins) fn of(pre: &InstancePre<PluginState>, init_each: bool) -> Hooks {
        Hooks {
            request: request::RequestAdapterPluginPre::new(pre.clone())
                .ok()
                .map(|pre| Warm::new(pre, init_each)),
            response: response::ResponseAdapterPluginPre::new(pre.clone())
                .ok()
                .map(|pre| Warm::new(pre, init_each)),
            oom: oom::OomPluginPre::new(pre.clone())
                .ok()
                .map(|pre| Warm::new(pre, init_each)),
            generate_request: generate_request::GenerateRequestAdapterPluginPre::new(pre.clone())
                .ok()
                .map(|pre| Warm::new(pre, init_each)),
            generate_response: generate_response::GenerateResponseAdapterPluginPre::new(
                pre.clone(),
            )
            .ok()
            .map(|pre| Warm::new(pre, init_each)),
            stream: stream::StreamAdapterPluginPre::new(pre.clone())
                .ok()
                .map(|pre| Warm::new(pre, init_each)),
            pipeline: pipeline::PipelinePluginPre::new(pre.clone())
                .ok()
                .map(|pre| Warm::new(pre, init_each)),
        }
    }

    /// Every exported hook, in the order of the fields, as what they all share: the plugin's
    /// configuration check.
    pub(in crate::plugins) fn exported(&self) -> impl Iterator<Item = &dyn ConfigCheck> {
        let all: [Option<&dyn ConfigCheck>; 7] = [
            self.request.as_ref().map(|w| w as &dyn ConfigCheck),
            self.response.as_ref().map(|w| w as &dyn ConfigCheck),
            self.oom.as_ref().map(|w| w as &dyn ConfigCheck),
            self.generate_request
                .as_ref()
                .map(|w| w as &dyn ConfigCheck),
            self.generate_response
                .as_ref()
                .map(|w| w as &dyn ConfigCheck),
            self.stream.as_ref().map(|w| w as &dyn ConfigCheck),
            self.pipeline.as_ref().map(|w| w as &dyn ConfigCheck),
        ];
        all.into_iter().flatten()
    }

    /// Whether the plugin exports any of the worlds.
    pub(in crate::plugins) fn any(&self) -> bool {
        self.exported().next().is_some()
    }
}

/// A configuration check's outcome: the plugin's verdict, or how the call failed.
pub(in crate::plugins) type Verdict = Result<Result<(), String>, CallFailure>;

/// A hook's `lifecycle.check-config`, whatever its world.
pub(in crate::plugins) trait ConfigCheck: Send + Sync {
    /// The plugin's verdict on its configuration, in a fresh instance of this hook.
    fn check<'a>(&'a self, engine: &'a Engine, limits: &'a Limits) -> BoxFuture<'a, Verdict>;
}

impl<P: Prepare> ConfigCheck for Warm<P> {
    fn check<'a>(&'a self, engine: &'a Engine, limits: &'a Limits) -> BoxFuture<'a, Verdict> {
        Box::pin(self.check_config(engine, limits))
    }
}

//! A plugin's hooks as data: one table of the worlds it exports ([`Hooks`]), and one way to call
//! any of them ([`PluginHost::call`]): take a fresh instance of the hook, run the call in it,
//! finish the call (its output captured, its failure typed), all within the plugin's limits on
//! the guest threads. Each hook method of [`PluginHost`] is that helper with its own export.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use wasmtime::component::InstancePre;
use wasmtime::{Engine, Store};

use super::{LoadedPlugin, PluginHost};
use crate::plugins::bindings::{
    generate_request, generate_response, oom, request, response, stream,
};
use crate::plugins::runtime::CallFailure;
use crate::plugins::store::{Limits, PluginState};
use crate::plugins::warm::{Prepare, Warm};
use crate::sessions::SessionStore;

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
}

/// The message of a plugin that exports none of the worlds.
pub(in crate::plugins) const EXPORTS_NONE: &str = "exports none of trident's hooks (0.1.0: request-adapter, \
     response-adapter, oom-classifier; 0.2.0: generate-request-adapter, \
     generate-response-adapter, stream-adapter)";

impl Hooks {
    /// The worlds `pre` (a compiled plugin, its imports linked) exports.
    pub(in crate::plugins) fn of(pre: &InstancePre<PluginState>) -> Hooks {
        Hooks {
            request: request::RequestAdapterPluginPre::new(pre.clone())
                .ok()
                .map(Warm::new),
            response: response::ResponseAdapterPluginPre::new(pre.clone())
                .ok()
                .map(Warm::new),
            oom: oom::OomPluginPre::new(pre.clone()).ok().map(Warm::new),
            generate_request: generate_request::GenerateRequestAdapterPluginPre::new(pre.clone())
                .ok()
                .map(Warm::new),
            generate_response: generate_response::GenerateResponseAdapterPluginPre::new(
                pre.clone(),
            )
            .ok()
            .map(Warm::new),
            stream: stream::StreamAdapterPluginPre::new(pre.clone())
                .ok()
                .map(Warm::new),
        }
    }

    /// Every exported hook, in the order of the fields, as what they all share: the plugin's
    /// configuration check.
    fn exported(&self) -> impl Iterator<Item = &dyn ConfigCheck> {
        let all: [Option<&dyn ConfigCheck>; 6] = [
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
        ];
        all.into_iter().flatten()
    }

    /// Whether the plugin exports any of the worlds.
    pub(in crate::plugins) fn any(&self) -> bool {
        self.exported().next().is_some()
    }
}

/// A configuration check's outcome: the plugin's verdict, or how the call failed.
type Verdict = Result<Result<(), String>, CallFailure>;

/// A hook's `lifecycle.check-config`, whatever its world.
trait ConfigCheck: Send + Sync {
    /// The plugin's verdict on its configuration, in a fresh instance of this hook.
    fn check<'a>(&'a self, engine: &'a Engine, limits: &'a Limits) -> BoxFuture<'a, Verdict>;
}

impl<P: Prepare> ConfigCheck for Warm<P> {
    fn check<'a>(&'a self, engine: &'a Engine, limits: &'a Limits) -> BoxFuture<'a, Verdict> {
        Box::pin(self.check_config(engine, limits))
    }
}

impl PluginHost {
    /// One call of the hook `hook` picks out of `plugin`'s table: a fresh instance taken (its
    /// store offering `session`'s store to the guest), `call` run in it, the call finished, within the plugin's limits ([`super::Runtime::run`]).
    /// Callers only call hooks a plugin exports (selection checks it).
    pub(in crate::plugins) async fn call<P, T>(
        &self,
        plugin: &Arc<LoadedPlugin>,
        session: Option<Arc<SessionStore>>,
        hook: fn(&Hooks) -> Option<&Warm<P>>,
        call: impl for<'a> FnOnce(
            &'a P::Instance,
            &'a mut Store<PluginState>,
        ) -> BoxFuture<'a, wasmtime::Result<T>>
        + Send
        + 'static,
    ) -> Result<T, CallFailure>
    where
        P: Prepare,
        T: Send + 'static,
    {
        let (engine, called) = (self.runtime.engine.clone(), Arc::clone(plugin));
        let run = async move {
            let warm = hook(&called.hooks).expect("plugins are called only for hooks they export");
            let (mut store, instance) = warm.take(&engine, &called.limits).await;
            // The instance may have been made ahead of the request: its session is set now.
            store.store.data_mut().session = session;
            let result = match instance {
                Ok(instance) => call(&instance, &mut store.store).await,
                Err(error) => Err(error),
            };
            store.finish(result)
        };
        self.runtime.run(&plugin.limits, run).await
    }
}

/// Runs the plugin's own configuration check once, through the first world it exports, as a
/// call like any other (within the engine's share, off the serving thread if it runs long).
pub(in crate::plugins) async fn check_config(
    runtime: &super::Runtime,
    plugin: &Arc<LoadedPlugin>,
) -> Result<(), String> {
    let (engine, called) = (runtime.engine.clone(), Arc::clone(plugin));
    let call = async move {
        match called.hooks.exported().next() {
            Some(hook) => hook.check(&engine, &called.limits).await,
            None => Ok(Ok(())),
        }
    };
    runtime
        .run(&plugin.limits, call)
        .await
        .map_err(|e| e.to_string())?
        .map_err(|message| format!("refuses its configuration: {message}"))
}

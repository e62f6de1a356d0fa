//! The one way to call any hook of a plugin: take a fresh instance of the hook, run the call in
//! it, finish the call (its output captured, its failure typed), all within the plugin's
//! limits on the guest threads. Each hook method of [`PluginHost`] is this with its own export.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use wasmtime::Store;

use super::PluginHost;
use crate::plugins::hooks::Hooks;
use crate::plugins::plugin::LoadedPlugin;
use crate::plugins::store::{CallFailure, PluginState};
use crate::plugins::stream_state::StreamState;
use crate::plugins::warm::{Prepare, Warm};
use crate::sessions::SessionStore;

/// What a call may keep beyond itself: its request's session store, and a stream adapter's
/// call its stream's state.
#[derive(Default)]
pub(super) struct Kept {
    pub(super) session: Option<Arc<SessionStore>>,
    pub(super) stream: Option<Arc<StreamState>>,
}

impl Kept {
    /// A call that may keep what its request's `session` keeps.
    pub(super) fn session(session: Option<Arc<SessionStore>>) -> Kept {
        Kept {
            session,
            stream: None,
        }
    }
}

impl PluginHost {
    /// One call of the hook `hook` picks out of `plugin`'s table: a fresh instance taken (its
    /// store offering what is `kept` to the guest), `call` run in it, the call finished,
    /// within the plugin's limits ([`super::Runtime::run`]).
    /// Callers only call hooks a plugin exports (selection checks it).
    pub(super) async fn call<P, T>(
        &self,
        plugin: &Arc<LoadedPlugin>,
        kept: Kept,
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
            // The instance may have been made ahead of the request: what it keeps is set now.
            let data = store.store.data_mut();
            data.session = kept.session;
            data.stream = kept.stream;
            let result = match instance {
                Ok(instance) => call(&instance, &mut store.store).await,
                Err(error) => Err(error),
            };
            store.finish(result)
        };
        self.runtime.run(&plugin.limits, run).await
    }
}

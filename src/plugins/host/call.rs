//! The one way to call any hook of a plugin: take a fresh instance of the hook (or the one its
//! stream keeps), run the call in it, finish the call (its output captured, its failure
//! typed), all within the plugin's limits on the guest threads, and count what it cost in the
//! plugin's account ([`crate::plugins::platform::accounting`]). Each hook method of
//! [`PluginHost`] is this with its own export.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::BoxFuture;
use wasmtime::Store;

use super::PluginHost;
use crate::plugins::platform::accounting::{Answer, Hook, Measured, Outcome, cpu_timed};
use crate::plugins::platform::plugin::LoadedPlugin;
use crate::plugins::runtime::hooks::Hooks;
use crate::plugins::runtime::kept_instance::KeptInstance;
use crate::plugins::runtime::model_calls::{ModelCaller, ModelSpent};
use crate::plugins::runtime::store::{CallFailure, PluginState};
use crate::plugins::runtime::stream_state::StreamState;
use crate::plugins::runtime::warm::{Prepare, Warm};
use crate::sessions::SessionStore;

/// What a call may keep beyond itself: its request's session store, and a stream adapter's
/// call its stream's state and the instance the stream's calls share; and who answers its model
/// calls.
#[derive(Default)]
pub(in crate::plugins) struct Kept {
    pub(in crate::plugins) session: Option<Arc<SessionStore>>,
    pub(in crate::plugins) stream: Option<Arc<StreamState>>,
    pub(in crate::plugins) instance: Option<Arc<KeptInstance>>,
    /// The target model's `max_batch_size`, for the host's primitives.
    pub(in crate::plugins) max_batch: Option<usize>,
    /// Who answers the call's model calls (`trident:models/models`); `None` refuses them.
    pub(in crate::plugins) models: Option<Arc<dyn ModelCaller>>,
}

impl Kept {
    /// A call that may keep what its request's `session` keeps.
    pub(in crate::plugins) fn session(session: Option<Arc<SessionStore>>) -> Kept {
        Kept {
            session,
            ..Kept::default()
        }
    }
}

impl PluginHost {
    /// One call of the hook `hook` picks out of `plugin`'s table: a fresh instance taken, or
    /// the one `kept.instance` holds (its store offering what is `kept` to the guest), `call`
    /// run in it, the call finished, within the plugin's limits ([`super::Runtime::run`]).
    /// With `kept.instance`, an instance whose call succeeded is kept there for the next call
    /// while the engine's budget allows ([`KeptInstance`]); otherwise it is dropped.
    /// Callers only call hooks a plugin exports (selection checks it).
    pub(in crate::plugins) async fn call<P, T>(
        &self,
        plugin: &Arc<LoadedPlugin>,
        kept: Kept,
        kind: Hook,
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
        T: Answer + Send + 'static,
    {
        let (engine, called) = (self.runtime.engine.clone(), Arc::clone(plugin));
        let (measured, queued) = (Arc::new(Measured::default()), Instant::now());
        let costs = Arc::clone(&measured);
        let run = async move {
            costs.set_wait(queued.elapsed());
            let reused = kept
                .instance
                .as_ref()
                .and_then(|slot| slot.take::<P::Instance>());
            let (mut store, instance, permit) = match reused {
                Some((store, instance, permit)) => (store, Ok(instance), Some(permit)),
                None => {
                    let warm =
                        hook(&called.hooks).expect("plugins are called only for hooks they export");
                    let (store, instance) = warm.take(&engine, &called.limits).await;
                    (store, instance, None)
                }
            };
            // The instance may have been made ahead of the request: what it keeps is set now.
            let data = store.store.data_mut();
            data.session = kept.session;
            data.stream = kept.stream;
            data.max_batch = kept.max_batch;
            data.models = kept.models;
            data.model_spent = ModelSpent::default();
            let instance = match instance {
                Ok(instance) => instance,
                Err(error) => {
                    costs.set_peak_memory(store.peak_memory_bytes());
                    return store.finish(Err(error));
                }
            };
            let result = call(&instance, &mut store.store).await;
            costs.set_peak_memory(store.peak_memory_bytes());
            costs.set_models(store.store.data().model_spent);
            let keep = kept
                .instance
                .filter(|_| result.is_ok() && store.may_serve_again())
                .zip(permit.or_else(|| called.limits.keep.try_keep()));
            match keep {
                Some((slot, permit)) => {
                    let result = store.end_call(result);
                    slot.put(store, instance, permit);
                    result
                }
                None => store.finish(result),
            }
        };
        let result = self
            .runtime
            .run(&plugin.limits, cpu_timed(run, Arc::clone(&measured)))
            .await;
        let outcome = match &result {
            Ok(answer) if answer.refused() => Outcome::Refused,
            Ok(_) => Outcome::Ok,
            Err(CallFailure::Deadline { .. }) => Outcome::Timeout,
            Err(CallFailure::Memory { .. }) => Outcome::Memory,
            Err(CallFailure::Trap { .. }) => Outcome::Trap,
        };
        plugin.account.load().record(kind, outcome, measured.cost());
        result
    }
}

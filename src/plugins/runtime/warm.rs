//! Instances made ahead of time. Each plugin hook keeps a couple of fresh instances ready, made
//! on the housekeeping threads ([`super::threads::Background`]) after a call takes one, so a
//! request pays for the call and not for the instantiation (most of a small call's cost when
//! caches are cold). Every instance starts from the plugin's initialised state
//! ([`super::snapshot`]; or, where that could not be copied, runs `check-config` itself before
//! it is handed out), serves exactly one call and is dropped after it, or, for a stream
//! adapter, serves its stream's later calls ([`super::kept_instance`]) and is dropped with
//! the stream: nothing a call leaves in memory reaches another request.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use wasmtime::{Engine, Store};

use super::store::CallFailure;
use super::store::{CallStore, Limits, PluginState};
use crate::plugins::wit::bindings::{
    generate_request, generate_response, oom, pipeline, request, response, stream,
};

/// How many fresh instances each hook keeps ready.
pub(in crate::plugins) const READY: usize = 2;

/// A pre-instantiated component that makes instances of one world.
pub trait Prepare: Clone + Send + Sync + 'static {
    /// An instance of the world, ready to call.
    type Instance: Send + 'static;
    /// Makes an instance in `store`.
    fn instantiate<'a>(
        &'a self,
        store: &'a mut Store<PluginState>,
    ) -> impl Future<Output = wasmtime::Result<Self::Instance>> + Send + 'a;
    /// The `lifecycle.check-config` export, which every world has.
    fn check_config<'a>(
        instance: &'a Self::Instance,
        store: &'a mut Store<PluginState>,
    ) -> impl Future<Output = wasmtime::Result<Result<(), String>>> + Send + 'a;
}

macro_rules! prepare {
    ($pre:ty, $instance:ty) => {
        impl Prepare for $pre {
            type Instance = $instance;
            fn instantiate<'a>(
                &'a self,
                store: &'a mut Store<PluginState>,
            ) -> impl Future<Output = wasmtime::Result<$instance>> + Send + 'a {
                self.instantiate_async(store)
            }
            fn check_config<'a>(
                instance: &'a $instance,
                store: &'a mut Store<PluginState>,
            ) -> impl Future<Output = wasmtime::Result<Result<(), String>>> + Send + 'a {
                instance.trident_plugin_lifecycle().call_check_config(store)
            }
        }
    };
}

prepare!(
    request::RequestAdapterPluginPre<PluginState>,
    request::RequestAdapterPlugin
);
prepare!(
    response::ResponseAdapterPluginPre<PluginState>,
    response::ResponseAdapterPlugin
);
prepare!(oom::OomPluginPre<PluginState>, oom::OomPlugin);
prepare!(
    generate_request::GenerateRequestAdapterPluginPre<PluginState>,
    generate_request::GenerateRequestAdapterPlugin
);
prepare!(
    generate_response::GenerateResponseAdapterPluginPre<PluginState>,
    generate_response::GenerateResponseAdapterPlugin
);
prepare!(
    stream::StreamAdapterPluginPre<PluginState>,
    stream::StreamAdapterPlugin
);
prepare!(
    pipeline::PipelinePluginPre<PluginState>,
    pipeline::PipelinePlugin
);

type Ready<I> = Arc<Mutex<Vec<(CallStore, I)>>>;

/// One hook of one plugin: its pre-instance and the instances ready for calls.
pub struct Warm<P: Prepare> {
    pre: P,
    ready: Ready<P::Instance>,
    refilling: Arc<AtomicBool>,
    /// Whether each instance runs `check-config` right after it is made: the plugin's
    /// initialised state could not be snapshotted ([`super::snapshot`]), so every instance
    /// builds it itself.
    init_each: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl<P: Prepare> Warm<P> {
    /// A hook with no instance ready yet: the first [`Warm::take`] makes one and starts the
    /// refill.
    pub fn new(pre: P, init_each: bool) -> Warm<P> {
        Warm {
            pre,
            ready: Arc::default(),
            refilling: Arc::default(),
            init_each,
        }
    }

    /// A new instance in `call`'s store, initialised when each instance must be.
    async fn make(pre: &P, init_each: bool, call: &mut CallStore) -> wasmtime::Result<P::Instance> {
        let instance = pre.instantiate(&mut call.store).await?;
        if init_each {
            call.arm();
            if let Err(message) = P::check_config(&instance, &mut call.store).await? {
                wasmtime::bail!("its check-config refused in a new instance: {message}");
            }
        }
        Ok(instance)
    }

    /// A fresh instance for one call, with its time limit started now: a ready one when there
    /// is one, else one made here. Either way the ready set is topped up in the background.
    pub async fn take(
        &self,
        engine: &Engine,
        limits: &Limits,
    ) -> (CallStore, wasmtime::Result<P::Instance>) {
        let ready = lock(&self.ready).pop();
        self.refill(engine, limits);
        match ready {
            Some((mut call, instance)) => {
                call.arm();
                (call, Ok(instance))
            }
            None => {
                let mut call = CallStore::new(engine, limits);
                let instance = Self::make(&self.pre, self.init_each, &mut call).await;
                call.arm();
                (call, instance)
            }
        }
    }

    /// Calls the plugin's own configuration check in a fresh instance.
    pub async fn check_config(
        &self,
        engine: &Engine,
        limits: &Limits,
    ) -> Result<Result<(), String>, CallFailure> {
        let (mut call, instance) = self.take(engine, limits).await;
        let outcome = match instance {
            Ok(instance) => P::check_config(&instance, &mut call.store).await,
            Err(error) => Err(error),
        };
        call.finish(outcome)
    }

    /// Makes instances until [`READY`] wait, on the housekeeping threads (one task at a time
    /// per hook).
    fn refill(&self, engine: &Engine, limits: &Limits) {
        if lock(&self.ready).len() >= READY || self.refilling.swap(true, Ordering::AcqRel) {
            return;
        }
        let (pre, ready, refilling, init_each) = (
            self.pre.clone(),
            Arc::clone(&self.ready),
            Arc::clone(&self.refilling),
            self.init_each,
        );
        let background = limits.background.clone();
        let (engine, limits) = (engine.clone(), limits.clone());
        background.spawn(async move {
            while lock(&ready).len() < READY {
                let mut call = CallStore::new(&engine, &limits);
                match Self::make(&pre, init_each, &mut call).await {
                    Ok(instance) => lock(&ready).push((call, instance)),
                    Err(error) => {
                        // The next call instantiates in line and reports the failure.
                        tracing::debug!(plugin = %limits.plugin, %error, "making a ready instance failed");
                        break;
                    }
                }
            }
            refilling.store(false, Ordering::Release);
        });
    }
}

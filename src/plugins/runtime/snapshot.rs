//! Warm state: what a plugin builds once (a parsed label table, a resize kernel, a vocabulary)
//! is built at load, and every call starts from it without sharing anything with another call.
//!
//! At load, the plugin's `lifecycle.check-config` runs once in an instance of the component
//! instrumented by wasmtime's wizer; then the state of every core instance (linear memories and
//! mutable globals) is written back into the component as its initial state (data segments and
//! global initialisers), and that component is what trident compiles and serves. Each call
//! still gets a fresh instance of its own: wasmtime's pooling allocator maps the component's
//! memory image copy-on-write, so an instance starts from the initialised state for the price
//! of a fresh one, and the pages a call writes are rewritten from the image before its slot
//! serves another call. Nothing one request leaves in guest memory reaches the next; what
//! every call shares is what `check-config` left, which no call can change.
//!
//! What cannot be copied: a component wizer cannot rewrite (componentize-qjs's JavaScript
//! components nest components), and an instance that holds a resource of the host when
//! `check-config` returns (a WASI stream it printed to: the resource lives in the store, not
//! in guest memory). Such a plugin is compiled as it is and every instance runs `check-config`
//! once right after it is made, ahead of its call ([`super::warm`]): the same state, paid per
//! instance off the request path instead of once.

use std::time::Duration;

use wasmtime::component::{ComponentExportIndex, Instance, InstancePre, Lift, WasmList};
use wasmtime::{Engine, Store};
use wasmtime_wizer::{ComponentInstanceState, Wizer};

use super::store::{CallStore, Limits, PluginState};

/// The lifecycle interfaces whose `check-config` initialises a plugin, one per WIT version.
const LIFECYCLES: [&str; 2] = [
    "trident:plugin/lifecycle@0.1.0",
    "trident:plugin/lifecycle@0.2.0",
];

/// A plugin's component after its initialisation, ready to compile.
pub enum Initialized {
    /// The component rewritten with the state `check-config` left: instances start from it.
    Snapshot(Vec<u8>),
    /// The component as it was, which cannot be snapshotted (the reason, for the log): each
    /// instance runs `check-config` itself. The configuration was accepted.
    PerInstance(String),
}

/// Why a plugin's initialisation refused its load.
#[derive(Debug)]
pub enum InitFailure {
    /// `check-config` refused the configuration, with its message.
    Refused(String),
    /// The call failed (trapped, ran out of time or memory) or the component is unusable.
    Failed(String),
}

/// Runs `check-config` once in an instrumented copy of `wasm` (within `limits`) and returns the
/// component rewritten with the state it left, or the reason it cannot be. CPU-heavy (parsing,
/// compiling, rewriting): call it on a blocking thread.
pub fn initialize(
    engine: &Engine,
    linker: &wasmtime::component::Linker<PluginState>,
    limits: &Limits,
    seed: [u8; 32],
    wasm: &[u8],
) -> Result<Initialized, InitFailure> {
    let wizer = Wizer::new();
    // Wizer checks its own output with assertions in debug builds: a component it cannot
    // rewrite correctly (shared memories) is a panic there, an invalid component otherwise.
    // Either way the plugin initialises per instance, and compiling it as built reports what
    // is wrong with it in wasmtime's words.
    let instrumented = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wizer.instrument_component(wasm)
    }));
    let (context, instrumented) = match instrumented {
        Ok(Ok(instrumented)) => instrumented,
        Ok(Err(error)) => return Ok(Initialized::PerInstance(format!("{error:#}"))),
        Err(_) => return Ok(Initialized::PerInstance("wizer cannot rewrite it".into())),
    };
    let pre = match super::engine::compile(engine, linker, &instrumented) {
        Ok(pre) => pre,
        Err(why) => return Ok(Initialized::PerInstance(why)),
    };
    if !super::hooks::Hooks::of(&pre, false).any() {
        return Err(InitFailure::Failed(super::hooks::EXPORTS_NONE.into()));
    }
    let wall =
        Duration::from_millis(limits.time_limit_ms.saturating_mul(2)) + Duration::from_secs(1);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| InitFailure::Failed(format!("cannot run its initialisation: {e}")))?;
    runtime.block_on(async {
        let mut call = CallStore::for_initialization(engine, limits, seed);
        let outcome = initialize_in(&wizer, &context, &pre, &mut call, wall).await;
        // What the guest printed is logged, and a failed call classified, like any call's.
        call.finish(outcome)
            .map_err(|e| InitFailure::Failed(e.to_string()))?
    })
}

async fn initialize_in(
    wizer: &Wizer,
    context: &wasmtime_wizer::ComponentContext<'_>,
    pre: &InstancePre<PluginState>,
    call: &mut CallStore,
    wall: Duration,
) -> wasmtime::Result<Result<Initialized, InitFailure>> {
    let run = async {
        let instance = pre.instantiate_async(&mut call.store).await?;
        call.arm();
        let verdict = check_config(&mut call.store, &instance).await?;
        Ok((instance, verdict))
    };
    let outcome = match tokio::time::timeout(wall, run).await {
        Ok(outcome) => outcome,
        Err(_) => Err(wasmtime::format_err!(
            "its initialisation ran past {} ms",
            wall.as_millis()
        )),
    };
    let (instance, verdict) = outcome?;
    if let Err(message) = verdict {
        return Ok(Err(InitFailure::Refused(message)));
    }
    if call.store.data().holds_resources() {
        return Ok(Ok(Initialized::PerInstance(
            "its check-config left a WASI resource open (it printed, or opened a stream); log \
             with host.log instead"
                .into(),
        )));
    }
    // Reading the state runs wizer's accessors: the time limit starts again for them.
    call.arm();
    let mut state = State {
        store: &mut call.store,
        instance,
        failed: None,
    };
    let snapshot = wizer.snapshot_component(context, &mut state).await;
    if let Some(why) = state.failed {
        return Ok(Ok(Initialized::PerInstance(why)));
    }
    Ok(snapshot
        .map(Initialized::Snapshot)
        .map_err(|e| InitFailure::Failed(format!("its state cannot be copied: {e:#}"))))
}

/// Calls the first lifecycle interface's `check-config` the instance exports.
pub(in crate::plugins) async fn check_config(
    store: &mut Store<PluginState>,
    instance: &Instance,
) -> wasmtime::Result<Result<(), String>> {
    let func = LIFECYCLES.iter().find_map(|name| {
        let interface = instance.get_export_index(&mut *store, None, name)?;
        instance.get_export_index(&mut *store, Some(&interface), "check-config")
    });
    let Some(func) = func else {
        wasmtime::bail!("exports no lifecycle interface");
    };
    let check = instance.get_typed_func::<(), (Result<(), String>,)>(&mut *store, func)?;
    Ok(check.call_async(&mut *store, ()).await?.0)
}

/// The initialised instance, as wizer reads its state: through the accessor functions its
/// instrumentation exported.
struct State<'a> {
    store: &'a mut Store<PluginState>,
    instance: Instance,
    /// Why an accessor could not be read, when one could not: the snapshot is then not used.
    failed: Option<String>,
}

impl State<'_> {
    /// Calls the accessor `func` of the exported instance `interface`. The accessors are
    /// wizer's own generated code, present in the instrumented component: a missing one or a
    /// failed call is noted in `failed` (the snapshot is then thrown away) and read as the
    /// type's default.
    async fn call<R: Lift + Send + Sync + 'static, T: Default>(
        &mut self,
        interface: &str,
        func: &str,
        read: impl FnOnce(&Store<PluginState>, R) -> T,
    ) -> T {
        let value = match self.lookup(interface, func) {
            Some(index) => match self
                .instance
                .get_typed_func::<(), (R,)>(&mut *self.store, index)
            {
                Ok(typed) => typed
                    .call_async(&mut *self.store, ())
                    .await
                    .map_err(|e| format!("reading its state ({func}) failed: {e:#}")),
                Err(error) => Err(format!("reading its state ({func}): {error:#}")),
            },
            None => Err(format!("reading its state: no accessor {func}")),
        };
        match value {
            Ok((value,)) => read(self.store, value),
            Err(why) => {
                self.failed.get_or_insert(why);
                T::default()
            }
        }
    }

    fn lookup(&mut self, interface: &str, func: &str) -> Option<ComponentExportIndex> {
        let outer = self
            .instance
            .get_export_index(&mut *self.store, None, interface)?;
        self.instance
            .get_export_index(&mut *self.store, Some(&outer), func)
    }
}

impl ComponentInstanceState for State<'_> {
    async fn call_func_ret_list_u8(
        &mut self,
        instance: &str,
        func: &str,
        contents: impl FnOnce(&[u8]) + Send,
    ) {
        let mut contents = Some(contents);
        self.call(instance, func, |store, list: WasmList<u8>| {
            if let Some(contents) = contents.take() {
                contents(list.as_le_slice(store));
            }
        })
        .await;
        if let Some(contents) = contents {
            contents(&[]);
        }
    }

    async fn call_func_ret_s32(&mut self, instance: &str, func: &str) -> i32 {
        self.call(instance, func, |_, value| value).await
    }

    async fn call_func_ret_s64(&mut self, instance: &str, func: &str) -> i64 {
        self.call(instance, func, |_, value| value).await
    }

    async fn call_func_ret_f32(&mut self, instance: &str, func: &str) -> u32 {
        self.call(instance, func, |_, value: f32| value.to_bits())
            .await
    }

    async fn call_func_ret_f64(&mut self, instance: &str, func: &str) -> u64 {
        self.call(instance, func, |_, value: f64| value.to_bits())
            .await
    }
}

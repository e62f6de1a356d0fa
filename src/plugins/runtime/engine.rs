//! The wasmtime side of plugins: an `Engine` (component model, async, epoch interruption,
//! pooled instances); a `Linker` offering WASI with no ambient capabilities plus trident's `host`
//! interface; each plugin's [`Limits`]; and where a call runs, within its engine's share and
//! the wall clock ([`Runtime::run`]). A call's own store is [`super::store`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, InstancePre, Linker};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, ProfilingStrategy,
};

use super::assets::Assets;
use super::compile_cache::CompileCache;
use super::scheduler::{self, Share, Stopped};
use super::store::{CallFailure, Limits, PluginState};
use super::threads::{self, Activity, Background, KeepBudget, PendingDrops};
use crate::plugins::primitives::pool::PrimitiveShare;
use crate::plugins::wit::bindings::host;

/// A wasmtime engine and linker, and where plugin housekeeping runs.
pub struct Runtime {
    pub(in crate::plugins) engine: Engine,
    pub(in crate::plugins) linker: Linker<PluginState>,
    background: Background,
    activity: Arc<Activity>,
    /// How many of this engine's calls run at once ([`scheduler`]).
    share: Share,
    /// How many of this engine's host primitives run, or are left running, at once
    /// ([`crate::plugins::primitives::pool`]): as many as its share.
    primitives: PrimitiveShare,
    /// Where calls that outlast their first tick run.
    guests: tokio::runtime::Handle,
    /// Where shadow candidates run, at the lowest priority.
    shadow_thread: tokio::runtime::Handle,
    /// This engine's used stores waiting for the housekeeping threads.
    pending_drops: Arc<PendingDrops>,
    /// How many instances this engine's streams may keep between calls.
    keep: Arc<KeepBudget>,
    /// How many shadow tasks may run at once: a quarter of the share, at least one
    /// ([`crate::plugins::platform::shadow`]).
    shadows: Arc<tokio::sync::Semaphore>,
    /// How many shadow tasks may wait for a slot of `shadows`: [`SHADOW_QUEUE`] per slot.
    shadow_queue: Arc<tokio::sync::Semaphore>,
    /// The share shadow candidates' calls run in, as large as the shadow budget: they never
    /// take a slot of `share`.
    shadow_share: Share,
    /// The primitive permits of shadow candidates' calls, as many: they never take one of
    /// `primitives`.
    shadow_primitives: PrimitiveShare,
    /// The seed plugins' initialisation draws its randomness from: the compile cache's, so
    /// that the initialised component is the same after a restart, else this engine's own.
    pub(in crate::plugins) snapshot_seed: [u8; 32],
}

/// The slack of a call's wall-clock bound over twice its time limit. The bound is for guests
/// that wait in a host call, which the epoch cannot stop; it also counts what the epoch does
/// not: wasmtime's own work making the instance (a Python guest's first instance on a busy
/// machine took over 200 ms when the slack was 20 ms, and its load failed) and the time the
/// call waits for a CPU. So it is generous: the time limit itself is the epoch's to enforce.
/// How many shadow tasks may wait for each slot of the shadow budget: a burst of sampled
/// requests is shadowed in order, not skipped, while the queue holds at most this many
/// requests' bodies per slot and each waits at most this many calls' time limits.
pub const SHADOW_QUEUE: usize = 16;

const WALL_SLACK: Duration = Duration::from_secs(1);

/// Bytes of each pooled memory (and table) kept mapped between calls, when a slot is reset with
/// the kernel's dirty-page scan: only the pages a call wrote are rewritten, so keeping more
/// costs memory (pages a guest touched stay resident; an idle engine gives them back, see
/// [`threads::IDLE_RELEASE`]) and no time. Memory past it is unmapped at each reset and the next
/// instance faults its pages in again: a Python guest (componentize-py) touches 6-8 MiB of heap
/// per call, and with 2 MiB kept its call took 219 page faults and ~600 µs; with 8 MiB, none and
/// ~60 µs (`cargo bench --bench plugin_cost -- small keep=MIB`).
const KEEP_RESIDENT: usize = 8 << 20;

/// The same without the dirty-page scan (swap in use, [`threads::Threads::swap_in_use`]): then
/// every reset rewrites the whole resident part, so it is kept small.
const KEEP_RESIDENT_WITHOUT_SCAN: usize = 2 << 20;

/// Set to `1`, every engine writes the address and name of each compiled guest function to
/// `/tmp/perf-PID.map`, where Linux's `perf report` finds them: a diagnostic for profiling
/// plugins, off by default (the file grows with every plugin compiled or reloaded).
pub const PERF_MAP_VARIABLE: &str = "TRIDENT_PLUGIN_PERF_MAP";

/// Whose plugins an engine runs, which sizes its pool of instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// The container's manifest: every request's plugins. 256 instances may be alive at once
    /// (calls in flight, ready instances, stores waiting for their reset, and the 64 that
    /// streams may keep between their calls); past that a call fails with a 500.
    Container,
    /// One model artifact's plugins ([`crate::plugins::host::model_plugins`]): 32 instances, 4 of which
    /// streams may keep between their calls. Every pooled
    /// memory slot reserves its own 4 GiB of address space (so that guest code needs no bounds
    /// checks); at the container's size each model's engine reserved 2 TiB, and an endpoint ran
    /// out of address space at about 60 models with plugins. At this size, about 500.
    /// `concurrency` calls of the model's plugins run at once (the container's
    /// `[model_plugins] concurrency`; at most [`MAX_MODEL_CONCURRENCY`]).
    Model {
        /// How many calls of the model's plugins run at once (clamped to 1 to
        /// [`MAX_MODEL_CONCURRENCY`]).
        concurrency: usize,
        /// The most the model's plugins may hold in the process, in bytes
        /// ([`crate::plugins::platform::loading::footprint`]; `[model_plugins] budget_mb`): past it, the load is
        /// refused.
        budget_bytes: u64,
    },
}

/// The most calls of one model's plugins that may run at once: half its pool, so that the
/// instances kept ready and the stores waiting for their reset fit in the rest.
pub const MAX_MODEL_CONCURRENCY: usize = 16;

impl Pool {
    fn instances(self) -> u32 {
        match self {
            Pool::Container => 256,
            Pool::Model { .. } => 32,
        }
    }

    /// How many instances streams may keep between their calls ([`super::kept_instance`]): a
    /// quarter of the container's pool (a 64-stream bench kept every stream's; at 32, half the
    /// streams took a fresh instance per event and cost 2.6 times the CPU), an eighth of a
    /// model's, whose calls in flight may take half of it. Each holds at most half its
    /// plugin's memory limit: at the default 64 MiB, 2 GiB for the container's in the worst
    /// case, and only the pages the calls wrote are the instance's own.
    fn kept(self) -> usize {
        match self {
            Pool::Container => 64,
            Pool::Model { .. } => 4,
        }
    }

    /// How many calls run at once, given `guest_threads`: the container's plugins, one per
    /// guest thread; a model's, its `concurrency`.
    fn share(self, guest_threads: usize) -> usize {
        match self {
            Pool::Container => guest_threads,
            Pool::Model { concurrency, .. } => concurrency.clamp(1, MAX_MODEL_CONCURRENCY),
        }
    }
}

impl Runtime {
    /// A runtime whose plugins may use up to `max_memory_bytes` of linear memory each, compiling
    /// through `cache` when there is one, with the pool `pool` says.
    ///
    /// Instances come from wasmtime's pooling allocator: memory slots are reserved once and
    /// reused copy-on-write, so a fresh instance per call costs microseconds, not a new mapping.
    /// Every runtime shares the process's epoch ticker and housekeeping threads
    /// ([`super::threads`]).
    pub fn new(
        max_memory_bytes: usize,
        cache: Option<&CompileCache>,
        pool: Pool,
    ) -> wasmtime::Result<Runtime> {
        let keep_resident = if threads::get()?.swap_in_use {
            KEEP_RESIDENT_WITHOUT_SCAN
        } else {
            KEEP_RESIDENT
        };
        Runtime::with_keep_resident(max_memory_bytes, cache, pool, keep_resident)
    }

    /// [`Runtime::new`] keeping `keep_resident` bytes of each pooled memory and table mapped
    /// between calls instead of trident's choice (for measuring the trade: `cargo bench --bench
    /// plugin_cost -- small keep=MIB`).
    pub fn with_keep_resident(
        max_memory_bytes: usize,
        cache: Option<&CompileCache>,
        pool: Pool,
        keep_resident: usize,
    ) -> wasmtime::Result<Runtime> {
        let threads = threads::get()?;
        let max_memory_bytes = max_memory_bytes.max(1 << 20).next_multiple_of(1 << 16);
        let instances = pool.instances();
        let mut config = PoolingAllocationConfig::default();
        config
            .total_component_instances(instances)
            .total_core_instances(instances * 8)
            .total_memories(instances * 2)
            .total_tables(instances * 8)
            .total_stacks(instances)
            .max_memory_size(max_memory_bytes)
            // Reset the first pages of a reused slot with memset instead of unmapping them, so
            // the next call does not page-fault its way through the guest's heap and stack.
            .linear_memory_keep_resident(keep_resident)
            .table_keep_resident(keep_resident)
            .pagemap_scan(if threads.swap_in_use {
                Enabled::No
            } else {
                Enabled::Auto
            });
        let mut engine_config = Config::new();
        engine_config.wasm_component_model(true);
        engine_config.epoch_interruption(true);
        if std::env::var_os(PERF_MAP_VARIABLE).is_some_and(|v| v == "1") {
            engine_config.profiler(ProfilingStrategy::PerfMap);
        }
        // No GC proposal: trident's wasmtime has no GC runtime, and with the proposal on, a
        // guest's subtyped function types reach checks that such a build answers with an abort
        // of the whole process (GHSA-rc4p-x33f-vpr2, fixed in 50.0.2; refused at compile time
        // here whatever the version). No toolchain trident supports emits them.
        engine_config.wasm_gc(false);
        engine_config.allocation_strategy(InstanceAllocationStrategy::Pooling(config));
        // A plugin's initialised state (plugins::snapshot) is a memory image as large as the
        // heap its initialisation grew, with gaps of zeros; wasmtime maps an image copy-on-write
        // only when it is dense or at most this size, and otherwise copies every data segment
        // into each instance (a Python guest's 17 ms per instance instead of microseconds). Any
        // image fits in a call's memory limit, so any is mapped.
        engine_config.memory_guaranteed_dense_image_size(max_memory_bytes as u64);
        engine_config.cache(cache.map(CompileCache::wasmtime));
        let engine = Engine::new(&engine_config)?;
        let activity = threads.tick(&engine);
        let linker = linker(&engine)?;
        Ok(Runtime {
            engine,
            linker,
            background: threads.background.clone(),
            activity,
            share: Share::new(pool.share(threads.guest_threads)),
            primitives: PrimitiveShare::new(pool.share(threads.guest_threads)),
            shadows: Arc::new(tokio::sync::Semaphore::new(
                (pool.share(threads.guest_threads) / 4).max(1),
            )),
            shadow_queue: Arc::new(tokio::sync::Semaphore::new(
                (pool.share(threads.guest_threads) / 4).max(1) * SHADOW_QUEUE,
            )),
            shadow_share: Share::new((pool.share(threads.guest_threads) / 4).max(1)),
            shadow_primitives: PrimitiveShare::new((pool.share(threads.guest_threads) / 4).max(1)),
            guests: threads.guests.clone(),
            shadow_thread: threads.shadows.clone(),
            pending_drops: Arc::new(PendingDrops::new(instances as usize / 4)),
            keep: Arc::new(KeepBudget::new(pool.kept())),
            snapshot_seed: cache
                .and_then(CompileCache::snapshot_seed)
                .unwrap_or_else(rand::random),
        })
    }

    /// What a plugin `plugin` of this engine needs for its calls: its configuration and
    /// assets, and its limits.
    pub fn limits(
        &self,
        plugin: &str,
        config: BTreeMap<String, String>,
        assets: Assets,
        memory_limit_mb: u64,
        time_limit_ms: u64,
    ) -> Limits {
        Limits {
            plugin: Arc::from(plugin),
            config: Arc::new(super::config::PluginConfig::new(config)),
            assets,
            memory_limit_mb,
            time_limit_ms,
            text: crate::plugins::primitives::text::TextCache::default(),
            counters: Arc::default(),
            background: self.background.clone(),
            activity: Arc::clone(&self.activity),
            pending_drops: Arc::clone(&self.pending_drops),
            keep: Arc::clone(&self.keep),
            primitives: self.primitives.clone(),
            shadow_primitives: self.shadow_primitives.clone(),
            models: super::model_calls::ModelAccess::default(),
        }
    }

    /// Runs one call of a plugin with `limits` (making its instance, calling, finishing)
    /// within this engine's share, off the serving thread once it outlasts an epoch tick
    /// ([`scheduler`]); a shadow candidate's call within the shadow share instead
    /// ([`scheduler::as_shadow`]).
    ///
    /// A guest waiting in a host call runs no code for the epoch to stop, so the call is also
    /// stopped by the wall clock: at twice its time limit (the instance, then the call, each
    /// have the limit) and `WALL_SLACK`.
    pub async fn run<T: Send + 'static>(
        &self,
        limits: &Limits,
        call: impl std::future::Future<Output = Result<T, CallFailure>> + Send + 'static,
    ) -> Result<T, CallFailure> {
        let wall = Duration::from_millis(limits.time_limit_ms.saturating_mul(2)) + WALL_SLACK;
        let share = if scheduler::in_shadow() {
            &self.shadow_share
        } else {
            &self.share
        };
        match scheduler::run(&self.guests, share, wall, call).await {
            Ok(outcome) => outcome,
            Err(Stopped::WallClock) => Err(CallFailure::Deadline {
                plugin: limits.plugin.to_string(),
                limit_ms: limits.time_limit_ms,
            }),
            Err(Stopped::TaskFailed(error)) => {
                tracing::error!(plugin = %limits.plugin, error, "a plugin call's task failed");
                Err(CallFailure::Trap {
                    plugin: limits.plugin.to_string(),
                    detail: "the call's task failed".into(),
                })
            }
        }
    }

    /// Starts `shadow` on the shadow thread (the lowest CPU priority), its calls in the shadow
    /// share, once a slot of the shadow budget is free, and hands what it made to `then` once
    /// its slot is given back (so whoever sees `then`'s effect finds the budget free). It waits
    /// for its slot in a queue of [`SHADOW_QUEUE`] per slot, in order; `false` (nothing
    /// started) when the queue is full. Nothing of the serving share is taken or waited for.
    pub fn spawn_shadow<T: Send + 'static>(
        &self,
        shadow: impl std::future::Future<Output = T> + Send + 'static,
        then: impl FnOnce(T) + Send + 'static,
    ) -> bool {
        let Ok(queued) = Arc::clone(&self.shadow_queue).try_acquire_owned() else {
            return false;
        };
        let slots = Arc::clone(&self.shadows);
        self.shadow_thread.spawn(scheduler::as_shadow(async move {
            // The semaphore is never closed: a slot always comes.
            let Ok(slot) = slots.acquire_owned().await else {
                return;
            };
            let made = shadow.await;
            drop((slot, queued));
            then(made);
        }));
        true
    }

    /// The engine plugins are compiled for (for tools and benches that compile one themselves).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The linker every plugin is instantiated through: WASI without ambient capabilities and
    /// trident's `host` interface.
    pub fn linker(&self) -> &Linker<PluginState> {
        &self.linker
    }
}

/// The linker every plugin of `engine` is instantiated through: WASI without ambient
/// capabilities, and trident's interfaces.
fn linker(engine: &Engine) -> wasmtime::Result<Linker<PluginState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    host::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |state| state)?;
    crate::plugins::wit::bindings::session_store::add_to_linker::<PluginState, HasSelf<PluginState>>(
        &mut linker,
        |state| state,
    )?;
    crate::plugins::wit::bindings::stream_state::add_to_linker::<PluginState, HasSelf<PluginState>>(
        &mut linker,
        |state| state,
    )?;
    crate::plugins::wit::bindings::host_v2::add_to_linker::<PluginState, HasSelf<PluginState>>(
        &mut linker,
        |state| state,
    )?;
    crate::plugins::wit::bindings::assets::add_to_linker::<PluginState, HasSelf<PluginState>>(
        &mut linker,
        |state| state,
    )?;
    crate::plugins::wit::bindings::images::add_to_linker::<PluginState, HasSelf<PluginState>>(
        &mut linker,
        |state| state,
    )?;
    crate::plugins::wit::bindings::text::add_to_linker::<PluginState, HasSelf<PluginState>>(
        &mut linker,
        |state| state,
    )?;
    crate::plugins::wit::bindings::assets_v2::add_to_linker::<PluginState, HasSelf<PluginState>>(
        &mut linker,
        |state| state,
    )?;
    crate::plugins::wit::bindings::models::add_to_linker::<PluginState, HasSelf<PluginState>>(
        &mut linker,
        |state| state,
    )?;
    Ok(linker)
}

/// Compiles a plugin's component for `engine` and links its imports, with the errors a load
/// reports: not a component, or importing what trident does not offer.
pub(in crate::plugins) fn compile(
    engine: &Engine,
    linker: &Linker<PluginState>,
    wasm: &[u8],
) -> Result<InstancePre<PluginState>, String> {
    let component =
        Component::new(engine, wasm).map_err(|e| format!("not a valid component: {e:#}"))?;
    linker
        .instantiate_pre(&component)
        .map_err(|e| format!("imports something trident does not offer: {e}"))
}

#[cfg(test)]
mod tests {
    use super::{Pool, Runtime};

    /// Engines for many models' plugins are alive at once: the address space each reserves
    /// allows hundreds (at the container's pool size, this failed at about 60).
    #[test]
    fn hundreds_of_model_engines_fit_beside_the_containers() {
        let container = Runtime::new(64 << 20, None, Pool::Container).unwrap();
        let models: Vec<Runtime> = (0..200)
            .map(|index| {
                let pool = Pool::Model {
                    concurrency: 1,
                    budget_bytes: u64::MAX,
                };
                Runtime::new(64 << 20, None, pool)
                    .unwrap_or_else(|e| panic!("model engine {index}: {e}"))
            })
            .collect();
        assert_eq!(models.len(), 200);
        drop(container);
    }
}

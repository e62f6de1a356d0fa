//! One call's store: the data a guest's calls see ([`PluginState`]: WASI without ambient
//! capabilities, trident's `host`, session-store and stream-state interfaces, the plugin's
//! configuration), its memory limiter and epoch deadline, its captured output, and how a call's failure is
//! classified when it ends ([`CallStore::finish`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::assets::Assets;
use super::config::PluginConfig;
use super::counters::{OUTPUT_BUDGET_BYTES, OutputBudget, PluginCounters};
use super::model_calls::{ModelAccess, ModelBudgetExceeded, ModelCaller, ModelSpent};
use super::output::CapturedOutput;
use super::stream_state::StreamState;
use super::threads::{Activity, Background, KeepBudget, PendingDrops};
use crate::plugins::primitives::pool::PrimitiveShare;
use crate::plugins::primitives::text::TextCache;
use crate::plugins::wit::bindings::host;
use crate::sessions::SessionStore;

/// Bytes of guest stdout or stderr captured per call (more traps the guest); of what is kept, the
/// log receives the call's output budget ([`OUTPUT_BUDGET_BYTES`]).
const OUTPUT_CAPACITY: usize = 256 * 1024;

/// Why a call failed, as trident tells clients.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallFailure {
    /// The guest ran past its time limit.
    #[error("plugin '{plugin}' exceeded its time limit of {limit_ms} ms")]
    Deadline {
        /// The plugin's name.
        plugin: String,
        /// Its time limit, in milliseconds.
        limit_ms: u64,
    },
    /// The guest asked for more memory than its limit.
    #[error("plugin '{plugin}' exceeded its memory limit of {limit_mb} MiB")]
    Memory {
        /// The plugin's name.
        plugin: String,
        /// Its memory limit, in MiB.
        limit_mb: u64,
    },
    /// The guest trapped (a panic, an illegal operation).
    #[error("plugin '{plugin}' failed: {detail}")]
    Trap {
        /// The plugin's name.
        plugin: String,
        /// What went wrong: the trap, or the first line of the error.
        detail: String,
    },
}

#[derive(Debug, thiserror::Error)]
#[error("deadline exceeded")]
pub(in crate::plugins) struct DeadlineExceeded;

#[derive(Debug, thiserror::Error)]
#[error("memory limit exceeded")]
struct MemoryLimitExceeded;

/// The data of one call's store.
pub struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
    pub(super) plugin: Arc<str>,
    config: Arc<PluginConfig>,
    pub(super) assets: Assets,
    /// When the guest code now running must stop (armed before instantiation and again before
    /// the call, so an instance made ahead of time gets its whole time limit).
    pub(super) deadline: Instant,
    /// What is left of this call's log output budget (`host.log`, stdout, stderr).
    output: OutputBudget,
    /// The store of the request's stateful session (`trident:session/store`), set for the call.
    pub(in crate::plugins) session: Option<Arc<SessionStore>>,
    /// The state of the stream a stream adapter's call belongs to (`trident:stream-state/state`).
    pub(in crate::plugins) stream: Option<Arc<StreamState>>,
    /// The tokenizers the plugin's calls parsed (`text`).
    pub(super) text: TextCache,
    /// The engine's permits for host primitives ([`crate::plugins::primitives::pool`]), and its shadow
    /// candidates' ([`super::scheduler::as_shadow`]).
    pub(super) primitives: PrimitiveShare,
    pub(super) shadow_primitives: PrimitiveShare,
    /// The most rows the request's model takes (its `max_batch_size`), set for a request
    /// adapter's call: the primitives refuse a body of more images or texts before decoding.
    pub(in crate::plugins) max_batch: Option<usize>,
    /// The most of the host's memory a primitive held for this store's calls at once (images
    /// decoded outside the sandbox), counted in the call's peak memory.
    pub(super) host_bytes: usize,
    /// Who answers the call's model calls (`trident:models/models`), set for a call that
    /// serves a request; `None` refuses them.
    pub(in crate::plugins) models: Option<Arc<dyn ModelCaller>>,
    /// Which models the plugin may call, and its per-request budgets.
    pub(super) model_access: ModelAccess,
    /// What the call's model calls have spent, set afresh for each call.
    pub(in crate::plugins) model_spent: ModelSpent,
}

impl PluginState {
    /// Logs `message` at `level` if the call's output budget allows, else counts it dropped
    /// (saying so once per call).
    fn log_within_budget(&mut self, level: tracing::Level, stream: &str, message: &str) {
        let plugin = &*self.plugin;
        match self.output.admit(message.len() + 1) {
            Ok(()) => match level {
                tracing::Level::ERROR => tracing::error!(plugin, stream, "{message}"),
                tracing::Level::WARN => tracing::warn!(plugin, stream, "{message}"),
                tracing::Level::INFO => tracing::info!(plugin, stream, "{message}"),
                _ => tracing::debug!(plugin, stream, "{message}"),
            },
            Err(true) => tracing::warn!(
                plugin,
                budget_bytes = OUTPUT_BUDGET_BYTES,
                "plugin output truncated: the rest of this call's output is dropped"
            ),
            Err(false) => {}
        }
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl host::Host for PluginState {
    fn config(&mut self, key: String) -> Option<String> {
        self.config.get(&key)
    }

    fn log(&mut self, level: host::Level, message: String) {
        let level = match level {
            host::Level::Debug => tracing::Level::DEBUG,
            host::Level::Info => tracing::Level::INFO,
            host::Level::Warn => tracing::Level::WARN,
            host::Level::Error => tracing::Level::ERROR,
        };
        self.log_within_budget(level, "log", &message);
    }
}

/// Version 0.2.0's `host`: the same functions.
impl crate::plugins::wit::bindings::host_v2::Host for PluginState {
    fn config(&mut self, key: String) -> Option<String> {
        host::Host::config(self, key)
    }

    fn log(&mut self, level: crate::plugins::wit::bindings::host_v2::Level, message: String) {
        use crate::plugins::wit::bindings::host_v2::Level as V2;
        let level = match level {
            V2::Debug => host::Level::Debug,
            V2::Info => host::Level::Info,
            V2::Warn => host::Level::Warn,
            V2::Error => host::Level::Error,
        };
        host::Host::log(self, level, message);
    }
}

/// `assets`: the plugin's assets, read at its load.
impl crate::plugins::wit::bindings::assets::Host for PluginState {
    fn get(&mut self, name: String) -> Option<Vec<u8>> {
        self.assets.get(&name).map(|bytes| bytes.to_vec())
    }
}

/// Version 0.2.0's `assets`: the same function.
impl crate::plugins::wit::bindings::assets_v2::Host for PluginState {
    fn get(&mut self, name: String) -> Option<Vec<u8>> {
        crate::plugins::wit::bindings::assets::Host::get(self, name)
    }
}

impl PluginState {
    /// The linear memory the guest may use, in bytes.
    pub(in crate::plugins) fn memory_limit_bytes(&self) -> u64 {
        self.limiter.limit_bytes as u64
    }

    /// Whether the guest holds resources of the host (WASI streams, pollables): an instance
    /// that does cannot be copied into another store ([`super::snapshot`]).
    pub(in crate::plugins) fn holds_resources(&self) -> bool {
        !self.table.is_empty()
    }
}

/// `trident:session/store`: the request's session store; outside a session, empty and
/// refusing writes.
impl crate::plugins::wit::bindings::session_store::Host for PluginState {
    fn session_id(&mut self) -> Option<String> {
        Some(self.session.as_ref()?.session_id().to_owned())
    }

    fn get(&mut self, key: String) -> Option<Vec<u8>> {
        self.session.as_ref()?.get(&key)
    }

    fn set(&mut self, key: String, value: Vec<u8>) -> Result<(), String> {
        match &self.session {
            Some(store) => store.set(key, value),
            None => Err("the request is not in a stateful session: nothing can be kept".into()),
        }
    }

    fn remove(&mut self, key: String) {
        if let Some(store) = &self.session {
            store.remove(&key);
        }
    }
}

struct MemoryLimiter {
    limit_bytes: usize,
    /// The largest size any of the instance's memories has grown to.
    largest_bytes: usize,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit_bytes {
            return Err(MemoryLimitExceeded.into());
        }
        self.largest_bytes = self.largest_bytes.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// What one plugin needs to run a call.
#[derive(Clone)]
pub struct Limits {
    /// The plugin's name, for errors and logs.
    pub plugin: Arc<str>,
    /// The plugin's configuration, which `host.config` answers from (noting the keys asked).
    pub config: Arc<PluginConfig>,
    /// The plugin's assets, which `assets.get` answers from.
    pub assets: Assets,
    /// The linear memory a call may use, in MiB.
    pub memory_limit_mb: u64,
    /// How long a call may run, in milliseconds (the instance and the call each get it).
    pub time_limit_ms: u64,
    /// The tokenizers the plugin's calls parsed, which `text` reuses.
    pub text: TextCache,
    /// Where the call's dropped output is counted.
    pub counters: Arc<PluginCounters>,
    /// Where what the call leaves is done.
    pub background: Background,
    /// Where the call's use of its engine is noted.
    pub activity: Arc<Activity>,
    /// The engine's used stores waiting to be dropped.
    pub pending_drops: Arc<PendingDrops>,
    /// How many instances the engine's streams may keep between calls
    /// ([`super::kept_instance`]).
    pub keep: Arc<KeepBudget>,
    /// The engine's permits for host primitives ([`crate::plugins::primitives::pool`]).
    pub primitives: PrimitiveShare,
    /// The permits of its shadow candidates' primitives.
    pub shadow_primitives: PrimitiveShare,
    /// The models the plugin's calls may call, and their per-request budgets (none by
    /// default).
    pub models: ModelAccess,
}

/// One call's store and its captured output.
pub struct CallStore {
    /// The store the call's instance lives in.
    pub store: Store<PluginState>,
    stdout: CapturedOutput,
    stderr: CapturedOutput,
    limits: Limits,
}

impl CallStore {
    /// A fresh store: no files, no environment, no network; stdout and stderr captured; memory
    /// and time limited (the clock starts now; [`CallStore::arm`] restarts it).
    pub fn new(engine: &Engine, limits: &Limits) -> CallStore {
        CallStore::with_random(engine, limits, None)
    }

    /// [`CallStore::new`] for a plugin's initialisation ([`super::snapshot`]): its randomness
    /// (`wasi:random`, secure and insecure) drawn from `seed`, so that the state it leaves, and
    /// so the component written from it, is the same each time the plugin is initialised with
    /// that seed (and its compiled code is found in the compile cache).
    pub fn for_initialization(engine: &Engine, limits: &Limits, seed: [u8; 32]) -> CallStore {
        CallStore::with_random(engine, limits, Some(seed))
    }

    fn with_random(engine: &Engine, limits: &Limits, seed: Option<[u8; 32]>) -> CallStore {
        limits.activity.mark();
        let stdout = CapturedOutput::new(OUTPUT_CAPACITY);
        let stderr = CapturedOutput::new(OUTPUT_CAPACITY);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_ip_name_lookup(false)
            .allow_tcp(false)
            .allow_udp(false);
        if let Some(seed) = seed {
            use rand::SeedableRng;
            let mut insecure = seed;
            insecure[0] ^= 1;
            wasi.secure_random(rand::rngs::StdRng::from_seed(seed))
                .insecure_random(rand::rngs::StdRng::from_seed(insecure))
                .insecure_random_seed(u128::from_le_bytes(
                    seed[16..].try_into().expect("16 bytes"),
                ));
        }
        let wasi = wasi.build();
        let state = PluginState {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                limit_bytes: usize::try_from(limits.memory_limit_mb.saturating_mul(1 << 20))
                    .unwrap_or(usize::MAX),
                largest_bytes: 0,
            },
            plugin: Arc::clone(&limits.plugin),
            config: Arc::clone(&limits.config),
            assets: limits.assets.clone(),
            deadline: Instant::now(),
            output: OutputBudget::default(),
            session: None,
            stream: None,
            text: limits.text.clone(),
            primitives: limits.primitives.clone(),
            shadow_primitives: limits.shadow_primitives.clone(),
            max_batch: None,
            host_bytes: 0,
            models: None,
            model_access: limits.models.clone(),
            model_spent: ModelSpent::default(),
        };
        let mut store = Store::new(engine, state);
        store.limiter(|state| &mut state.limiter);
        store.epoch_deadline_callback(|store| {
            if Instant::now() >= store.data().deadline {
                Err(DeadlineExceeded.into())
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        let mut call = CallStore {
            store,
            stdout,
            stderr,
            limits: limits.clone(),
        };
        call.arm();
        call
    }

    /// Whether the instance may serve another call ([`super::kept_instance`]): its memory has
    /// grown to at most half its limit. Linear memory never shrinks, so an instance whose
    /// calls leave memory behind would otherwise carry it into the next call, and a call that
    /// fits a fresh instance could fail in a kept one; past half, the next call gets a fresh
    /// instance and at least half its limit to itself.
    pub fn may_serve_again(&self) -> bool {
        let limiter = &self.store.data().limiter;
        limiter.largest_bytes <= limiter.limit_bytes / 2
    }

    /// The largest any of the instance's memories has grown to, with the host's memory its
    /// primitives held for it at most (an image decoded natively), in bytes.
    pub fn peak_memory_bytes(&self) -> u64 {
        let state = self.store.data();
        (state.limiter.largest_bytes as u64).saturating_add(state.host_bytes as u64)
    }

    /// Starts the time limit afresh: the guest may run for the plugin's limit from now.
    pub fn arm(&mut self) {
        self.store.data_mut().deadline =
            Instant::now() + Duration::from_millis(self.limits.time_limit_ms);
        self.store.set_epoch_deadline(1);
    }

    /// Ends the call and drops its store in the background: [`CallStore::end_call`], then the
    /// store goes.
    pub fn finish<T>(mut self, result: wasmtime::Result<T>) -> Result<T, CallFailure> {
        let result = self.end_call(result);
        self.discard();
        result
    }

    /// Drops the store on the housekeeping threads, where its memory slot is reset
    /// ([`Background::drop_later`]).
    pub fn discard(self) {
        self.limits
            .background
            .drop_later(self.store, &self.limits.pending_drops);
    }

    /// Ends a call, keeping its store for another ([`super::kept_instance`]): logs what the
    /// guest printed during the call (within the call's output budget, counting the rest; the
    /// next call has a budget of its own) and classifies a failure.
    pub fn end_call<T>(&mut self, result: wasmtime::Result<T>) -> Result<T, CallFailure> {
        for (stream, pipe) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let contents = pipe.take();
            for line in String::from_utf8_lossy(&contents)
                .lines()
                .filter(|l| !l.is_empty())
            {
                self.store
                    .data_mut()
                    .log_within_budget(tracing::Level::INFO, stream, line);
            }
        }
        let dropped = std::mem::take(&mut self.store.data_mut().output).dropped();
        if dropped > 0 {
            self.limits.counters.add_output_dropped(dropped);
        }
        let plugin = &*self.limits.plugin;
        result.map_err(|error| {
            let plugin = plugin.to_owned();
            if error.downcast_ref::<DeadlineExceeded>().is_some() {
                CallFailure::Deadline {
                    plugin,
                    limit_ms: self.limits.time_limit_ms,
                }
            } else if error.downcast_ref::<MemoryLimitExceeded>().is_some() {
                CallFailure::Memory {
                    plugin,
                    limit_mb: self.limits.memory_limit_mb,
                }
            } else if let Some(budget) = error.downcast_ref::<ModelBudgetExceeded>() {
                tracing::warn!(plugin, error = %budget, "plugin call stopped");
                CallFailure::Trap {
                    plugin,
                    detail: budget.to_string(),
                }
            } else {
                let detail = match error.downcast_ref::<wasmtime::Trap>() {
                    Some(trap) => trap.to_string(),
                    None => format!("{error:#}")
                        .lines()
                        .next()
                        .unwrap_or("trap")
                        .to_owned(),
                };
                tracing::warn!(plugin, error = format!("{error:?}"), "plugin call failed");
                CallFailure::Trap { plugin, detail }
            }
        })
    }
}

/// `trident:stream-state/state`: the call's stream's state; outside a stream adapter's call,
/// empty and refusing writes.
impl crate::plugins::wit::bindings::stream_state::Host for PluginState {
    fn get(&mut self) -> Option<Vec<u8>> {
        self.stream.as_ref()?.get()
    }

    fn set(&mut self, value: Vec<u8>) -> Result<(), String> {
        match &self.stream {
            Some(stream) => stream.set(value),
            None => Err("the call is not a stream adapter's: nothing can be kept".into()),
        }
    }
}

//! The process's plugin threads, shared by every engine (the container's and each model's): one
//! epoch ticker, which advances every engine's epoch (the clock of time limits) and gives back
//! the memory an idle engine's pool keeps resident; the housekeeping threads, where the work a
//! call leaves is done; and the guest threads, where calls that outlast a tick run
//! ([`super::scheduler`]). One set for the process, not one per engine: a ticker per engine
//! woke 500 times a second for every model loaded with plugins.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use wasmtime::{Engine, EngineWeak};

/// How often the epoch advances: the granularity of time limits and of yields to tokio.
const EPOCH_TICK: Duration = Duration::from_millis(2);

/// How long an engine's plugins go without a call before its pool gives back the memory it
/// keeps resident for free slots (`linear_memory_keep_resident`: up to 8 MiB per slot ever
/// used, so what a burst of concurrent Python calls left resident stayed so until the process
/// ended). The next call after that faults its pages in again, once per idle spell.
pub const IDLE_RELEASE: Duration = Duration::from_secs(30);

/// How often the ticker looks for idle engines, in ticks (one second).
const IDLE_CHECK_TICKS: u32 = 500;

/// The process's plugin threads.
pub struct Threads {
    /// The housekeeping threads, where the work a call leaves is done.
    pub background: Background,
    /// The housekeeping threads' runtime, kept for the life of the process.
    _housekeeping: tokio::runtime::Runtime,
    /// The guest threads: where a plugin call that outlasts its first epoch tick runs to its
    /// end, one thread per core ([`super::scheduler`]).
    pub guests: tokio::runtime::Handle,
    /// How many guest threads there are.
    pub guest_threads: usize,
    /// The guest threads' runtime, kept for the life of the process.
    _guests: tokio::runtime::Runtime,
    /// The shadow thread: where shadow adapters' candidates run ([`crate::plugins::platform::shadow`]), one
    /// thread at the lowest CPU priority (nice 19), so that it runs on what the serving and
    /// guest threads leave.
    pub shadows: tokio::runtime::Handle,
    /// The shadow thread's runtime, kept for the life of the process.
    _shadows: tokio::runtime::Runtime,
    /// Every live engine, whose epoch the ticker advances (dropped engines are forgotten).
    engines: Arc<Mutex<Vec<Ticked>>>,
    /// Whether the kernel swaps: then a pooled slot is reset without the `PAGEMAP_SCAN` of
    /// the pages a call dirtied. The scan reports pages that are written and present; a page
    /// written by one call and swapped out before its reset is neither, so wasmtime (48) would
    /// leave it as it was and the next instance in the slot would read what the last call
    /// wrote. Without the scan the slot's resident part is reset in full and the rest unmapped.
    pub swap_in_use: bool,
}

/// The process's plugin threads, started by the first call.
pub fn get() -> std::io::Result<&'static Threads> {
    static THREADS: OnceLock<Result<Threads, String>> = OnceLock::new();
    THREADS
        .get_or_init(|| Threads::start().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| std::io::Error::other(format!("cannot start the plugin threads: {e}")))
}

impl Threads {
    fn start() -> std::io::Result<Threads> {
        let (background, housekeeping) = Background::start()?;
        let guest_threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let guests = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(guest_threads)
            .thread_name("trident-plugin-guest")
            .enable_all()
            .build()?;
        let shadows = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .thread_name("trident-plugin-shadow")
            .on_thread_start(|| {
                // Linux gives a thread id its own nice value.
                let thread = rustix::thread::gettid();
                if let Err(error) = rustix::process::setpriority_process(Some(thread), 19) {
                    tracing::warn!(%error, "the shadow thread keeps the serving priority");
                }
            })
            .enable_all()
            .build()?;
        let engines: Arc<Mutex<Vec<Ticked>>> = Arc::default();
        let ticked = Arc::clone(&engines);
        let releases = background.clone();
        std::thread::Builder::new()
            .name("trident-plugin-epoch".into())
            .spawn(move || {
                let mut ticks: u32 = 0;
                loop {
                    std::thread::sleep(EPOCH_TICK);
                    ticks = ticks.wrapping_add(1);
                    let check_idle = ticks.is_multiple_of(IDLE_CHECK_TICKS);
                    let now = process_millis();
                    let mut engines = ticked.lock().unwrap_or_else(|p| p.into_inner());
                    engines.retain(|ticked| match ticked.engine.upgrade() {
                        Some(engine) => {
                            engine.increment_epoch();
                            if check_idle && ticked.activity.release_due(now) {
                                releases.spawn(async move {
                                    let bytes = engine.release_idle_pool_memory();
                                    tracing::debug!(
                                        bytes,
                                        "idle plugin engine: resident pool memory given back"
                                    );
                                });
                            }
                            true
                        }
                        None => false,
                    });
                }
            })?;
        let swap_in_use = swap_in_use();
        if swap_in_use {
            tracing::info!(
                "swap is in use: plugin memory is reset in full after each call, not by the kernel's dirty-page scan"
            );
        }
        Ok(Threads {
            background,
            _housekeeping: housekeeping,
            guests: guests.handle().clone(),
            guest_threads,
            _guests: guests,
            shadows: shadows.handle().clone(),
            _shadows: shadows,
            engines,
            swap_in_use,
        })
    }

    /// Has the ticker advance `engine`'s epoch from now on, for as long as it lives, and give
    /// back its pool's resident memory when the returned [`Activity`] says it has been idle for
    /// [`IDLE_RELEASE`].
    pub fn tick(&self, engine: &Engine) -> Arc<Activity> {
        let activity = Arc::new(Activity::new());
        self.engines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Ticked {
                engine: engine.weak(),
                activity: Arc::clone(&activity),
            });
        activity
    }
}

/// An engine the ticker serves.
struct Ticked {
    engine: EngineWeak,
    activity: Arc<Activity>,
}

/// Milliseconds since the process first asked, the clock of [`Activity`].
fn process_millis() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    u64::try_from(START.get_or_init(Instant::now).elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// When an engine's plugins were last used, and whether its idle memory has been given back
/// since.
#[derive(Debug)]
pub struct Activity {
    last_used_ms: AtomicU64,
    released: AtomicBool,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            last_used_ms: AtomicU64::new(process_millis()),
            released: AtomicBool::new(false),
        }
    }

    /// Notes a use of the engine now (a store made for a call or a ready instance).
    pub fn mark(&self) {
        self.last_used_ms.store(process_millis(), Ordering::Relaxed);
        if self.released.load(Ordering::Relaxed) {
            self.released.store(false, Ordering::Relaxed);
        }
    }

    /// Whether the engine has been idle for [`IDLE_RELEASE`] at `now_ms` and its memory not
    /// given back since its last use: true once per idle spell. A use racing this only means
    /// memory is given back just as it is needed again, which costs page faults, not
    /// correctness (wasmtime gives back only slots no instance holds).
    fn release_due(&self, now_ms: u64) -> bool {
        let idle_ms = now_ms.saturating_sub(self.last_used_ms.load(Ordering::Relaxed));
        idle_ms >= IDLE_RELEASE.as_millis() as u64
            && self
                .released
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }
}

/// Whether any swap area is active (`/proc/swaps` lists one), or this cannot be told.
fn swap_in_use() -> bool {
    match std::fs::read_to_string("/proc/swaps") {
        // A header line, then one line per active area.
        Ok(swaps) => swaps.lines().skip(1).any(|line| !line.trim().is_empty()),
        Err(_) => true,
    }
}

/// Where the work a call leaves runs: making the next ready instances and dropping used stores
/// (the reset of their memory slots). Threads of their own, so that it runs beside the serving
/// threads instead of between a request's steps: on a serving thread, an instance made while
/// the request waited for the model (0.7 ms for a Python guest) delayed its answer by as much.
/// One thread per four cores (at least one, at most four).
#[derive(Clone)]
pub struct Background {
    handle: tokio::runtime::Handle,
}

/// An engine's used stores handed to the housekeeping threads and not dropped yet, and how
/// many may wait: past that the caller drops its store itself. Each waiting store holds a slot
/// of its engine's pool, so an unbounded backlog (calls finishing faster than housekeeping
/// resets their slots, as when other engines' guests take the CPU) would turn into "concurrent
/// limit reached" failures; bounded, the callers slow down instead. Counted per engine: with one
/// count for the process, a model's 32-slot pool ran out at one request at a time while another
/// model's calls filled the backlog.
#[derive(Debug)]
pub struct PendingDrops {
    waiting: AtomicUsize,
    max: usize,
}

impl PendingDrops {
    /// At most `max` stores waiting.
    pub fn new(max: usize) -> PendingDrops {
        PendingDrops {
            waiting: AtomicUsize::new(0),
            max,
        }
    }
}

/// How many instances an engine's streams may keep between their calls
/// ([`super::kept_instance`]), and how many are kept now. Each kept instance holds a slot of
/// the engine's pool (and the memory its guest touched) while its stream waits for the model,
/// so they are few: a stream past the budget gets a fresh instance per call, as every call
/// did before instances were kept.
#[derive(Debug)]
pub struct KeepBudget {
    permits: Arc<tokio::sync::Semaphore>,
}

impl KeepBudget {
    /// At most `max` instances kept at once.
    pub fn new(max: usize) -> KeepBudget {
        KeepBudget {
            permits: Arc::new(tokio::sync::Semaphore::new(max)),
        }
    }

    /// A permit to keep one instance, while the budget lasts; the instance is counted until
    /// the permit drops.
    pub fn try_keep(&self) -> Option<KeepPermit> {
        Arc::clone(&self.permits).try_acquire_owned().ok()
    }
}

/// One kept instance's share of its engine's [`KeepBudget`], given back when dropped.
pub type KeepPermit = tokio::sync::OwnedSemaphorePermit;

impl Background {
    fn start() -> std::io::Result<(Background, tokio::runtime::Runtime)> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads((cores / 4).clamp(1, 4))
            .thread_name("trident-plugin-prep")
            .enable_all()
            .build()?;
        let background = Background {
            handle: runtime.handle().clone(),
        };
        Ok((background, runtime))
    }

    /// Runs `work` on the housekeeping threads.
    pub fn spawn(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        drop(self.handle.spawn(work));
    }

    /// Drops a used store (or anything holding one) on the housekeeping threads, after the request has moved on: dropping
    /// resets its pooled memory slot, which the request need not wait for. The slot cannot
    /// serve another instance before the reset, so nothing of this call reaches the next. With
    /// as many of its engine's stores already waiting as `pending` allows, the store is dropped
    /// here and now.
    pub fn drop_later<T: Send + 'static>(&self, store: T, pending: &Arc<PendingDrops>) {
        if pending.waiting.fetch_add(1, Ordering::AcqRel) >= pending.max {
            pending.waiting.fetch_sub(1, Ordering::AcqRel);
            drop(store);
            return;
        }
        let pending = Arc::clone(pending);
        self.spawn(async move {
            drop(store);
            pending.waiting.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{Activity, IDLE_RELEASE};

    #[test]
    fn a_keep_budget_lends_at_most_its_size_and_gets_each_permit_back() {
        let budget = super::KeepBudget::new(2);
        let (first, second) = (budget.try_keep(), budget.try_keep());
        assert!(first.is_some() && second.is_some());
        assert!(budget.try_keep().is_none(), "the budget is spent");
        drop(first);
        let third = budget.try_keep();
        assert!(third.is_some(), "a dropped permit is given back");
        assert!(budget.try_keep().is_none());
        drop((second, third));
        assert!(budget.try_keep().is_some());
    }

    #[test]
    fn idle_memory_is_given_back_once_per_idle_spell() {
        let idle = IDLE_RELEASE.as_millis() as u64;
        let activity = Activity::new();
        let used = activity
            .last_used_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(!activity.release_due(used), "not idle yet");
        assert!(
            !activity.release_due(used + idle - 1),
            "not idle long enough"
        );
        assert!(activity.release_due(used + idle), "idle: give back");
        assert!(
            !activity.release_due(used + idle + 1_000),
            "already given back"
        );
        activity.mark();
        let used = activity
            .last_used_ms
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(!activity.release_due(used + idle - 1), "used again");
        assert!(
            activity.release_due(used + idle),
            "idle again: give back again"
        );
    }
}

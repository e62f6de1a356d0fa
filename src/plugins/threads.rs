//! The process's plugin threads, shared by every engine (the container's and each model's): one
//! epoch ticker, which advances every engine's epoch (the clock of time limits), and the
//! housekeeping threads, where the work a call leaves is done. One set for the process, not one
//! per engine: a ticker per engine woke 500 times a second for every model loaded with plugins.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use wasmtime::{Engine, EngineWeak};

/// How often the epoch advances: the granularity of time limits and of yields to tokio.
const EPOCH_TICK: Duration = Duration::from_millis(2);

/// At most this many used stores wait for the housekeeping threads; past it the caller drops
/// its store itself. Each waiting store holds a slot of its engine's pool, so an unbounded
/// backlog (calls finishing faster than housekeeping resets their slots) would turn into
/// "concurrent limit reached" failures; bounded, the serving threads slow down instead.
const MAX_PENDING_DROPS: usize = 32;

/// The process's plugin threads.
pub struct Threads {
    pub background: Background,
    /// The housekeeping threads' runtime, kept for the life of the process.
    _housekeeping: tokio::runtime::Runtime,
    /// Every live engine, whose epoch the ticker advances (dropped engines are forgotten).
    engines: Arc<Mutex<Vec<EngineWeak>>>,
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
        let engines: Arc<Mutex<Vec<EngineWeak>>> = Arc::default();
        let ticked = Arc::clone(&engines);
        std::thread::Builder::new()
            .name("trident-plugin-epoch".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(EPOCH_TICK);
                    let mut engines = ticked.lock().unwrap_or_else(|p| p.into_inner());
                    engines.retain(|weak| match weak.upgrade() {
                        Some(engine) => {
                            engine.increment_epoch();
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
        let (background, housekeeping) = Background::start()?;
        Ok(Threads {
            background,
            _housekeeping: housekeeping,
            engines,
            swap_in_use,
        })
    }

    /// Has the ticker advance `engine`'s epoch from now on, for as long as it lives.
    pub fn tick(&self, engine: &Engine) {
        self.engines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(engine.weak());
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
    /// Used stores handed to the threads and not dropped yet.
    pending_drops: Arc<AtomicUsize>,
}

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
            pending_drops: Arc::default(),
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
    /// `MAX_PENDING_DROPS` already waiting, the store is dropped here and now.
    pub fn drop_later<T: Send + 'static>(&self, store: T) {
        if self.pending_drops.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING_DROPS {
            self.pending_drops.fetch_sub(1, Ordering::AcqRel);
            drop(store);
            return;
        }
        let pending = Arc::clone(&self.pending_drops);
        self.spawn(async move {
            drop(store);
            pending.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

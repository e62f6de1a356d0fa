//! What each loaded plugin costs, per hook: its calls by outcome, the CPU time of each call, the
//! largest its guest memory grew to in each call, how long each call waited for a slot on
//! the guest threads ([`crate::plugins::runtime::scheduler`]), and the model calls its calls
//! made (`trident:models`: how many, their tensors' bytes, the time waited for them). Counted in the plugin's own [`PluginAccount`], made
//! at its load and dropped with it, so `/metrics` shows only plugins loaded now
//! ([`crate::metrics`] renders it). Recorded by the one call path (`host::call`); a plugin's
//! configuration check at load is not a call of a hook, and the calls of its golden cases are
//! forgotten before it serves (the account is reset), so the account is its traffic's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::plugins::runtime::model_calls::ModelSpent;

/// The hooks a call can be of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `request-adapter`.
    Request,
    /// `response-adapter`.
    Response,
    /// `oom-classifier`.
    Oom,
    /// `generate-request-adapter`.
    GenerateRequest,
    /// `generate-response-adapter`.
    GenerateResponse,
    /// `stream-adapter`.
    Stream,
    /// `pipeline` (`trident:models`).
    Pipeline,
}

impl Hook {
    /// Every hook, in the order of [`PluginAccount`]'s table.
    pub const ALL: [Hook; 7] = [
        Hook::Request,
        Hook::Response,
        Hook::Oom,
        Hook::GenerateRequest,
        Hook::GenerateResponse,
        Hook::Stream,
        Hook::Pipeline,
    ];

    /// Its `hook` label.
    pub fn name(self) -> &'static str {
        match self {
            Hook::Request => "request",
            Hook::Response => "response",
            Hook::Oom => "oom",
            Hook::GenerateRequest => "generate_request",
            Hook::GenerateResponse => "generate_response",
            Hook::Stream => "stream",
            Hook::Pipeline => "pipeline",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It answered.
    Ok,
    /// The plugin refused the request on purpose (a 400, 415 or 500 of its own).
    Refused,
    /// It trapped.
    Trap,
    /// It ran past its time limit.
    Timeout,
    /// It asked for more memory than its limit.
    Memory,
}

impl Outcome {
    /// Every outcome, in the order of a hook's counters.
    pub const ALL: [Outcome; 5] = [
        Outcome::Ok,
        Outcome::Refused,
        Outcome::Trap,
        Outcome::Timeout,
        Outcome::Memory,
    ];

    /// Its `outcome` label.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Refused => "refused",
            Outcome::Trap => "trap",
            Outcome::Timeout => "timeout",
            Outcome::Memory => "memory",
        }
    }
}

/// Upper bounds of the time histograms' buckets (CPU time and slot waits), in seconds.
pub const TIME_BUCKETS: [f64; 8] = [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.25, 1.0];
/// Upper bounds of the peak memory histogram's buckets, in bytes (1 MiB to 4 GiB).
pub const MEMORY_BUCKETS: [f64; 7] = [
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
    268_435_456.0,
    1_073_741_824.0,
    4_294_967_296.0,
];

/// A histogram of fixed buckets, counted with atomics. Values are whole units (nanoseconds,
/// bytes); the buckets' bounds are in the rendered unit, `scale` of them to one.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    scale: f64,
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    sum: AtomicU64,
}

impl Histogram {
    /// A histogram of seconds, counted in nanoseconds, with [`TIME_BUCKETS`].
    pub fn seconds() -> Histogram {
        Histogram::new(&TIME_BUCKETS, 1e9)
    }

    /// Counts a duration (a histogram of [`Histogram::seconds`]).
    pub fn observe_duration(&self, duration: Duration) {
        self.observe(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX));
    }

    fn new(bounds: &'static [f64], scale: f64) -> Histogram {
        Histogram {
            bounds,
            scale,
            buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    fn observe(&self, value: u64) {
        let scaled = value as f64 / self.scale;
        if let Some(at) = self.bounds.iter().position(|bound| scaled <= *bound) {
            self.buckets[at].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    fn reset(&self) {
        for bucket in self.buckets.iter().chain([&self.count, &self.sum]) {
            bucket.store(0, Ordering::Relaxed);
        }
    }

    /// Its counts now.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: self.bounds,
            counts: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            count: self.count.load(Ordering::Relaxed),
            sum: self.sum.load(Ordering::Relaxed) as f64 / self.scale,
        }
    }
}

/// A histogram's counts at one moment, in its rendered unit.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Each bucket's upper bound.
    pub bounds: &'static [f64],
    /// How many values fell in each bucket (not cumulative); values past the last bound are
    /// only in `count`.
    pub counts: Vec<u64>,
    /// How many values there were.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
}

impl HistogramSnapshot {
    /// The cumulative count of each bucket, as Prometheus writes `_bucket` lines.
    pub fn cumulative(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        self.bounds
            .iter()
            .zip(self.counts.iter().scan(0, |total, count| {
                *total += count;
                Some(*total)
            }))
            .map(|(bound, total)| (*bound, total))
    }

    /// Adds `other`'s counts (of the same buckets) to these.
    pub fn add(&mut self, other: &HistogramSnapshot) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.count += other.count;
        self.sum += other.sum;
    }
}

/// One hook's counters.
#[derive(Debug)]
struct HookAccount {
    outcomes: [AtomicU64; 5],
    cpu: Histogram,
    memory: Histogram,
    wait: Histogram,
    /// Model calls its calls made (`trident:models`), and the tensor bytes they moved.
    model_calls: AtomicU64,
    model_bytes: AtomicU64,
    /// Time each call that made model calls waited for them.
    model_time: Histogram,
}

impl HookAccount {
    fn new() -> HookAccount {
        HookAccount {
            outcomes: Default::default(),
            cpu: Histogram::new(&TIME_BUCKETS, 1e9),
            memory: Histogram::new(&MEMORY_BUCKETS, 1.0),
            wait: Histogram::new(&TIME_BUCKETS, 1e9),
            model_calls: AtomicU64::new(0),
            model_bytes: AtomicU64::new(0),
            model_time: Histogram::new(&TIME_BUCKETS, 1e9),
        }
    }
}

/// One hook's counters at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct HookSnapshot {
    /// Calls by outcome, in [`Outcome::ALL`]'s order.
    pub outcomes: [u64; 5],
    /// CPU time per call, in seconds.
    pub cpu_seconds: HistogramSnapshot,
    /// The largest the guest's memory grew to in each call, in bytes.
    pub peak_memory_bytes: HistogramSnapshot,
    /// How long each call waited for a slot on the guest threads, in seconds.
    pub wait_seconds: HistogramSnapshot,
    /// Model calls the hook's calls made.
    pub model_calls: u64,
    /// Bytes of tensors those model calls sent and received.
    pub model_bytes: u64,
    /// How long each call that made model calls waited for them, in seconds.
    pub model_seconds: HistogramSnapshot,
}

impl HookSnapshot {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &HookSnapshot) {
        for (mine, theirs) in self.outcomes.iter_mut().zip(other.outcomes) {
            *mine += theirs;
        }
        self.cpu_seconds.add(&other.cpu_seconds);
        self.peak_memory_bytes.add(&other.peak_memory_bytes);
        self.wait_seconds.add(&other.wait_seconds);
        self.model_calls += other.model_calls;
        self.model_bytes += other.model_bytes;
        self.model_seconds.add(&other.model_seconds);
    }
}

/// What one call cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCost {
    /// CPU time the guest threads spent on it (instantiation included when it had no instance
    /// ready).
    pub cpu: Duration,
    /// The largest its instance's memory grew to, in bytes.
    pub peak_memory: u64,
    /// How long it waited for a slot on the guest threads.
    pub wait: Duration,
    /// The model calls it made, their bytes and the time it waited for them.
    pub models: ModelSpent,
}

/// A loaded plugin's counters, by hook ([`Hook::ALL`]).
#[derive(Debug)]
pub struct PluginAccount {
    hooks: [HookAccount; Hook::ALL.len()],
}

impl Default for PluginAccount {
    fn default() -> PluginAccount {
        PluginAccount {
            hooks: std::array::from_fn(|_| HookAccount::new()),
        }
    }
}

impl PluginAccount {
    /// Counts one call of `hook`.
    pub fn record(&self, hook: Hook, outcome: Outcome, cost: CallCost) {
        let account = &self.hooks[hook.index()];
        let at = Outcome::ALL
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or_default();
        account.outcomes[at].fetch_add(1, Ordering::Relaxed);
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        account.cpu.observe(nanos(cost.cpu));
        account.memory.observe(cost.peak_memory);
        account.wait.observe(nanos(cost.wait));
        if cost.models.calls > 0 {
            account
                .model_calls
                .fetch_add(u64::from(cost.models.calls), Ordering::Relaxed);
            account
                .model_bytes
                .fetch_add(cost.models.bytes, Ordering::Relaxed);
            account.model_time.observe(nanos(cost.models.time));
        }
    }

    /// Starts every counter again from zero: the account of a plugin about to serve, after
    /// the calls of its golden cases at load (`host::cases::gate`).
    pub fn reset(&self) {
        for account in &self.hooks {
            for outcome in &account.outcomes {
                outcome.store(0, Ordering::Relaxed);
            }
            account.cpu.reset();
            account.memory.reset();
            account.wait.reset();
            account.model_calls.store(0, Ordering::Relaxed);
            account.model_bytes.store(0, Ordering::Relaxed);
            account.model_time.reset();
        }
    }

    /// `hook`'s counters now.
    pub fn snapshot(&self, hook: Hook) -> HookSnapshot {
        let account = &self.hooks[hook.index()];
        HookSnapshot {
            outcomes: std::array::from_fn(|i| account.outcomes[i].load(Ordering::Relaxed)),
            cpu_seconds: account.cpu.snapshot(),
            peak_memory_bytes: account.memory.snapshot(),
            wait_seconds: account.wait.snapshot(),
            model_calls: account.model_calls.load(Ordering::Relaxed),
            model_bytes: account.model_bytes.load(Ordering::Relaxed),
            model_seconds: account.model_time.snapshot(),
        }
    }
}

/// What a call measures of itself while it runs on the guest threads, read by its caller after
/// it ends (whether the call finished, failed or was abandoned at the wall clock).
#[derive(Debug, Default)]
pub struct Measured {
    cpu_nanos: AtomicU64,
    peak_memory: AtomicU64,
    wait_nanos: AtomicU64,
    models: std::sync::Mutex<ModelSpent>,
}

impl Measured {
    /// Sets what its model calls spent.
    pub fn set_models(&self, spent: ModelSpent) {
        *self.models.lock().unwrap_or_else(|e| e.into_inner()) = spent;
    }

    /// Sets how long the call waited before it started.
    pub fn set_wait(&self, wait: Duration) {
        self.wait_nanos.store(
            u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Sets the largest its memory grew to.
    pub fn set_peak_memory(&self, bytes: u64) {
        self.peak_memory.store(bytes, Ordering::Relaxed);
    }

    /// What was measured.
    pub fn cost(&self) -> CallCost {
        CallCost {
            cpu: Duration::from_nanos(self.cpu_nanos.load(Ordering::Relaxed)),
            peak_memory: self.peak_memory.load(Ordering::Relaxed),
            wait: Duration::from_nanos(self.wait_nanos.load(Ordering::Relaxed)),
            models: *self.models.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }
}

/// The CPU time the calling thread has used.
fn thread_cpu() -> Duration {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(time.tv_sec).unwrap_or_default(),
        u32::try_from(time.tv_nsec).unwrap_or_default(),
    )
}

/// `inner`, adding the CPU time of each of its polls (on whichever thread runs it) to
/// `measured`.
pub fn cpu_timed<F: Future>(inner: F, measured: Arc<Measured>) -> CpuTimed<F> {
    CpuTimed {
        inner: Box::pin(inner),
        measured,
    }
}

/// A future whose polls' CPU time is counted ([`cpu_timed`]).
pub struct CpuTimed<F> {
    inner: Pin<Box<F>>,
    measured: Arc<Measured>,
}

impl<F: Future> Future for CpuTimed<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let started = thread_cpu();
        let polled = self.inner.as_mut().poll(cx);
        let spent = thread_cpu().saturating_sub(started);
        self.measured.cpu_nanos.fetch_add(
            u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        polled
    }
}

/// Whether a hook's answer is a refusal of the plugin's own (its `plugin-error`).
pub trait Answer {
    /// True for a refusal.
    fn refused(&self) -> bool;
}

impl<T, E> Answer for Result<T, E> {
    fn refused(&self) -> bool {
        self.is_err()
    }
}

impl Answer for bool {
    fn refused(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_fall_in_their_buckets_and_sum_up() {
        let account = PluginAccount::default();
        let cost = |cpu_us: u64, mib: u64, wait_us: u64| CallCost {
            cpu: Duration::from_micros(cpu_us),
            peak_memory: mib << 20,
            wait: Duration::from_micros(wait_us),
            ..CallCost::default()
        };
        account.record(Hook::Request, Outcome::Ok, cost(50, 2, 0));
        account.record(Hook::Request, Outcome::Timeout, cost(2_000_000, 2, 300));
        account.record(Hook::Stream, Outcome::Refused, cost(700, 40, 0));
        let request = account.snapshot(Hook::Request);
        assert_eq!(request.outcomes, [1, 0, 0, 1, 0]);
        // 50 µs is in the first bucket; 2 s is past the last, counted only in the total.
        assert_eq!(request.cpu_seconds.counts, [1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(request.cpu_seconds.count, 2);
        assert!((request.cpu_seconds.sum - 2.00005).abs() < 1e-9);
        assert_eq!(
            request.peak_memory_bytes.cumulative().collect::<Vec<_>>()[..2],
            [(1_048_576.0, 0), (4_194_304.0, 2)]
        );
        assert_eq!(request.wait_seconds.counts[1], 1);
        let mut total = account.snapshot(Hook::Stream);
        assert_eq!(total.outcomes, [0, 1, 0, 0, 0]);
        total.add(&request);
        assert_eq!(total.outcomes, [1, 1, 0, 1, 0]);
        assert_eq!(total.peak_memory_bytes.count, 3);
        assert_eq!(account.snapshot(Hook::Oom).cpu_seconds.count, 0);
        account.reset();
        assert_eq!(account.snapshot(Hook::Request), account.snapshot(Hook::Oom));
    }

    #[test]
    fn cpu_time_is_counted_per_poll() {
        let measured = Arc::new(Measured::default());
        let work = async {
            let mut x = 0u64;
            for i in 0..20_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
            x
        };
        let before = thread_cpu();
        futures_util::FutureExt::now_or_never(cpu_timed(work, Arc::clone(&measured))).unwrap();
        let outer = thread_cpu() - before;
        let cpu = measured.cost().cpu;
        // What the wrapper counted is the thread's CPU time for the poll, not wall time.
        assert!(
            cpu > Duration::ZERO && cpu <= outer && cpu * 2 >= outer,
            "{cpu:?} of {outer:?}"
        );
    }
}

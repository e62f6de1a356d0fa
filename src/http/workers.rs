//! The threads that serve connections: one single-threaded tokio runtime per thread
//! (thread-per-core), each connection living on one of them from its first byte to its last.
//!
//! Why not one multi-threaded runtime: a response comes back on one of Triton's threads, and
//! waking a task from outside a multi-threaded runtime wakes one worker, which on finding work
//! wakes a second to look for more. At low concurrency that is two wake-ups and two context
//! switches per response where one is needed, paid in latency and CPU on every small request.
//! A single-threaded runtime has one thread to wake. Work is spread by connection instead: the
//! accept loop hands each new connection to the thread with the fewest open ones.
//!
//! Each thread also keeps a timer anchor (`timer_anchor`): a one-second tick that stops tokio's
//! timer from waking its own thread through the I/O driver's eventfd each time a request arms a
//! timeout.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// One serving thread: its runtime, how many connections it holds, how to stop it.
struct Worker {
    handle: Handle,
    open: Arc<AtomicUsize>,
    stop: oneshot::Sender<()>,
    thread: JoinHandle<()>,
}

/// The serving threads of one listener.
pub struct Workers {
    workers: Vec<Worker>,
}

/// A connection's place on a worker: counted open until dropped.
pub struct Assignment {
    open: Arc<AtomicUsize>,
}

impl Drop for Assignment {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Workers {
    /// Starts `count` serving threads (at least one), each with its own runtime.
    pub fn start(count: usize) -> std::io::Result<Workers> {
        let mut workers = Vec::with_capacity(count.max(1));
        for index in 0..count.max(1) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let handle = runtime.handle().clone();
            handle.spawn(timer_anchor());
            let (stop, stopped) = oneshot::channel::<()>();
            let thread = std::thread::Builder::new()
                .name(format!("trident-http-{index}"))
                .spawn(move || {
                    // Runs the thread's tasks until told to stop (or the sender is gone); the
                    // runtime, and any connection still on it, is dropped here, on its thread.
                    let _ = runtime.block_on(stopped);
                })?;
            workers.push(Worker {
                handle,
                open: Arc::new(AtomicUsize::new(0)),
                stop,
                thread,
            });
        }
        Ok(Workers { workers })
    }

    /// Runs `serve` on the thread with the fewest open connections; the [`Assignment`] it gets
    /// counts the connection there until dropped.
    pub fn assign<F>(&self, serve: impl FnOnce(Assignment) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let worker = self
            .workers
            .iter()
            .min_by_key(|w| w.open.load(Ordering::Relaxed))
            .expect("at least one worker");
        worker.open.fetch_add(1, Ordering::Relaxed);
        let assignment = Assignment {
            open: Arc::clone(&worker.open),
        };
        worker.handle.spawn(serve(assignment));
    }

    /// Stops every thread (their remaining tasks are dropped) and waits for them to end. Blocks:
    /// call it off the async threads (`spawn_blocking`).
    pub fn stop(self) {
        let mut threads = Vec::with_capacity(self.workers.len());
        for worker in self.workers {
            let _ = worker.stop.send(());
            threads.push(worker.thread);
        }
        for thread in threads {
            if thread.join().is_err() {
                tracing::error!("an HTTP worker thread panicked");
            }
        }
    }
}

/// The period of [`timer_anchor`]: shorter than any timeout a request arms (the header and body
/// read timeouts are whole seconds, at least one).
const TIMER_ANCHOR_PERIOD: Duration = Duration::from_secs(1);

/// Keeps a timer pending on the thread at all times, so that arming a request's timeout never
/// costs a system call.
///
/// tokio's timer remembers, when its thread parks, the earliest deadline it will wake for; a
/// timer armed later with an earlier deadline (or any timer, when none was pending) unparks the
/// thread through the I/O driver's eventfd, even when the thread arming it is the runtime's own
/// and is awake. With no timer pending while a request waits for the model, hyper's header-read
/// timeout for the next request did exactly that once per request: a `write` to the eventfd and
/// a spare turn of `epoll_wait` (`bench/analysis.md`). With this tick pending, every timeout of a
/// second or more lands after the remembered deadline and is armed in memory only. The cost is
/// one wake-up per second on an idle thread.
async fn timer_anchor() {
    let mut tick = tokio::time::interval(TIMER_ANCHOR_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
    }
}

/// How many serving threads a listener gets: `configured`, else one per available core.
pub fn default_count(configured: Option<usize>) -> usize {
    configured
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

#[cfg(test)]
mod tests {
    use std::task::Poll;

    use super::*;

    #[test]
    fn connections_go_to_the_least_loaded_thread_and_are_counted_until_dropped() {
        let workers = Workers::start(2).unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        for _ in 0..3 {
            let sender = sender.clone();
            workers.assign(move |assignment| async move {
                let thread = std::thread::current().name().map(str::to_owned);
                sender.send((thread, assignment)).unwrap();
            });
        }
        let mut held: Vec<_> = (0..3).map(|_| receiver.recv().unwrap()).collect();
        held.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<_> = held.iter().map(|(t, _)| t.as_deref().unwrap()).collect();
        assert_eq!(
            names,
            ["trident-http-0", "trident-http-0", "trident-http-1"]
        );
        let open = |i: usize| workers.workers[i].open.load(Ordering::Relaxed);
        assert_eq!((open(0), open(1)), (2, 1));
        held.clear();
        assert_eq!((open(0), open(1)), (0, 0));
        workers.stop();
    }

    /// Write system calls made by the calling thread so far (`/proc/thread-self/io`).
    fn writes_by_this_thread() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").expect("task I/O accounting");
        io.lines()
            .find_map(|line| line.strip_prefix("syscw: "))
            .and_then(|n| n.parse().ok())
            .expect("a syscw line")
    }

    #[test]
    fn arming_a_timeout_on_a_serving_thread_makes_no_system_call() {
        let workers = Workers::start(1).unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        workers.assign(move |_assignment| async move {
            // Three tries, so that a thread stalled past the anchor's tick (which then has no
            // deadline pending until its task runs again) cannot fail the test alone.
            let mut writes = Vec::new();
            for _ in 0..3 {
                // Park with only the anchor and this short sleep pending, as between requests.
                tokio::time::sleep(Duration::from_millis(20)).await;
                let before = writes_by_this_thread();
                // Arm a timeout as hyper does for the next request's header; poll it once.
                let mut timeout = std::pin::pin!(tokio::time::sleep(Duration::from_secs(30)));
                let polled =
                    std::future::poll_fn(|cx| Poll::Ready(timeout.as_mut().poll(cx))).await;
                assert!(polled.is_pending());
                writes.push(writes_by_this_thread() - before);
            }
            sender.send(writes).unwrap();
        });
        let writes = receiver.recv().unwrap();
        // Without the anchor, tokio's timer writes to the driver's eventfd each time (one write).
        assert!(
            writes.contains(&0),
            "arming a timeout wrote to the eventfd every time: {writes:?}"
        );
        workers.stop();
    }

    #[test]
    fn count_defaults_to_the_cores() {
        assert_eq!(default_count(Some(3)), 3);
        assert!(default_count(None) >= 1);
        assert_eq!(default_count(Some(0)), default_count(None));
    }
}

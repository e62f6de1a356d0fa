//! Where guest code runs, and how much of it one engine may run at once.
//!
//! A call starts on the thread that asks for it (a serving thread) and runs there until the
//! guest first yields, at the next epoch tick (at most 2 ms of guest time): most calls (60 µs
//! to 1 ms) end before that and pay no hand-off. A call still running then moves, as it is, to
//! the guest threads (one per core, [`super::threads::Threads::guests`]) for the rest of its
//! time. So a guest that burns its whole time limit holds a guest thread, not every connection
//! of a serving thread: when calls ran on the serving threads to the end, one model's plugin
//! looping at its limit took another model's p50 from 1 ms to 105 ms, plugins or none
//! (`scripts/noisy-neighbour`, bench/noisy-neighbour.md).
//!
//! Each engine has a [`Share`]: at most that many of its calls run at once (the container's
//! plugins: as many as there are guest threads; a model's own plugins: half as many, see
//! [`super::manifest::ModelPluginRules::concurrency`]). One model's guests therefore never hold
//! every guest thread; its calls past its share wait, in order, which costs that model's own
//! latency only.
//!
//! A guest waiting in a host call (a WASI clock, `sleep`) runs no code, so the epoch cannot
//! stop it: every call is also bounded by the wall clock, at twice its time limit (making the
//! instance and the call each have the limit) and a little more.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::runtime::{CallFailure, Limits};

/// The slack of the wall-clock bound over twice the time limit: the epoch ticks that the
/// limit's own check may take to notice, and the call's setting up and finishing.
const WALL_SLACK: Duration = Duration::from_millis(20);

/// How many of one engine's calls may run at once.
#[derive(Debug, Clone)]
pub struct Share {
    permits: Arc<Semaphore>,
    size: usize,
}

impl Share {
    /// A share of `size` calls at once (at least one).
    pub fn new(size: usize) -> Share {
        let size = size.max(1);
        Share {
            permits: Arc::new(Semaphore::new(size)),
            size,
        }
    }

    /// How many calls may run at once.
    pub fn size(&self) -> usize {
        self.size
    }
}

/// Runs one plugin call (`call`: taking an instance, calling it, finishing) within `share`:
/// here until the guest first yields, then on the `guests` threads; bounded by the wall clock.
/// Dropping the returned future (the client went away) stops the call at its next yield.
pub async fn run<T: Send + 'static>(
    guests: &Handle,
    share: &Share,
    limits: &Limits,
    call: impl Future<Output = Result<T, CallFailure>> + Send + 'static,
) -> Result<T, CallFailure> {
    let Ok(permit) = Arc::clone(&share.permits).acquire_owned().await else {
        // The semaphore is never closed.
        return Err(failed(limits, "the plugin's engine is closed"));
    };
    let wall = Duration::from_millis(limits.time_limit_ms.saturating_mul(2)) + WALL_SLACK;
    // The bound's timer belongs to the guest threads, which live as long as the process: the
    // serving thread the call starts on may stop while a moved call still runs.
    let mut bounded = {
        let _guest_timer = guests.enter();
        Box::pin(tokio::time::timeout(wall, call))
    };
    let first = std::future::poll_fn(|cx| Poll::Ready(bounded.as_mut().poll(cx))).await;
    let outcome = match first {
        Poll::Ready(outcome) => outcome,
        Poll::Pending => {
            let moved = AbortOnDrop(guests.spawn(async move {
                let _permit = permit;
                bounded.await
            }));
            match moved.await {
                Ok(outcome) => outcome,
                Err(error) => {
                    tracing::error!(plugin = %limits.plugin, %error, "a plugin call's task failed");
                    return Err(failed(limits, "the call's task failed"));
                }
            }
        }
    };
    outcome.unwrap_or_else(|_elapsed| {
        Err(CallFailure::Deadline {
            plugin: limits.plugin.to_string(),
            limit_ms: limits.time_limit_ms,
        })
    })
}

fn failed(limits: &Limits, detail: &str) -> CallFailure {
    CallFailure::Trap {
        plugin: limits.plugin.to_string(),
        detail: detail.to_owned(),
    }
}

/// A task on the guest threads that is stopped when nobody waits for it any more.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;

    use crate::plugins::runtime::{CallFailure, Limits, Pool, Runtime};

    fn runtime(pool: Pool) -> (Runtime, Limits) {
        let runtime = Runtime::new(1 << 20, None, pool).unwrap();
        let limits = runtime.limits("test", Default::default(), 1, 50);
        (runtime, limits)
    }

    fn thread_name() -> String {
        std::thread::current().name().unwrap_or("").to_owned()
    }

    #[tokio::test]
    async fn a_short_call_runs_in_place_and_a_long_one_moves_to_the_guest_threads() {
        let (runtime, limits) = runtime(Pool::Container);
        let here = thread_name();
        let short = runtime.run(&limits, async { Ok(thread_name()) }).await;
        assert_eq!(short, Ok(here.clone()));
        let long = runtime
            .run(&limits, async {
                let before = thread_name();
                tokio::task::yield_now().await;
                Ok((before, thread_name()))
            })
            .await
            .unwrap();
        assert_eq!(long.0, here, "it starts in place");
        assert_eq!(long.1, "trident-plugin-guest", "and ends on a guest thread");
    }

    #[tokio::test]
    async fn an_engine_runs_no_more_calls_at_once_than_its_share() {
        let (runtime, limits) = runtime(Pool::Model { concurrency: 2 });
        assert_eq!(runtime.share(), 2);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let call = || {
            let (running, most) = (Arc::clone(&running), Arc::clone(&most));
            runtime.run(&limits, async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            })
        };
        let outcomes = tokio::join!(call(), call(), call(), call(), call(), call());
        let outcomes = [
            outcomes.0, outcomes.1, outcomes.2, outcomes.3, outcomes.4, outcomes.5,
        ];
        assert!(outcomes.iter().all(|outcome| *outcome == Ok(())));
        assert_eq!(most.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_call_waiting_in_the_host_is_stopped_by_the_wall_clock() {
        let (runtime, limits) = runtime(Pool::Container);
        let started = std::time::Instant::now();
        let outcome: Result<(), CallFailure> = runtime
            .run(&limits, async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(())
            })
            .await;
        assert_eq!(
            outcome,
            Err(CallFailure::Deadline {
                plugin: "test".into(),
                limit_ms: 50
            })
        );
        assert!(started.elapsed() < Duration::from_secs(60));
    }

    #[tokio::test]
    async fn a_call_nobody_waits_for_is_stopped() {
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let (runtime, limits) = runtime(Pool::Container);
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = Flag(Arc::clone(&dropped));
        let call = runtime.run(&limits, async move {
            let _flag = flag;
            loop {
                tokio::task::yield_now().await;
            }
        });
        let abandoned: Result<Result<(), CallFailure>, _> =
            tokio::time::timeout(Duration::from_millis(20), call).await;
        assert!(abandoned.is_err(), "the call was still running");
        for _ in 0..500 {
            if dropped.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the abandoned call still runs");
    }
}

//! Where guest code runs, and how much of it one engine may run at once.
//!
//! A call starts on the thread that asks for it (a serving thread) and runs there until the
//! guest first yields, at the next epoch tick (at most 2 ms of guest time): most calls (60 µs
//! to 1 ms) end before that and pay no hand-off. A call still running then moves, as it is, to
//! the guest threads (one per core, the process's guest threads) for the rest of its
//! time. So a guest that burns its whole time limit holds a guest thread, not every connection
//! of a serving thread: when calls ran on the serving threads to the end, one model's plugin
//! looping at its limit took another model's p50 from 1 ms to 105 ms, plugins or none
//! (`scripts/noisy-neighbour`, bench/noisy-neighbour.md).
//!
//! Each engine has a [`Share`]: at most that many of its calls run at once (the container's
//! plugins: as many as there are guest threads; a model's own plugins: half as many, see
//! `[model_plugins] concurrency`). One model's guests therefore never hold
//! every guest thread; its calls past its share wait, in order, which costs that model's own
//! latency only.
//!
//! A guest waiting in a host call (a WASI clock, `sleep`) runs no code, so the epoch cannot
//! stop it: every call is also bounded by the wall clock (the runtime gives twice its time
//! limit, for making the instance and for the call, and a little more).
//!
//! A shadow candidate's calls ([`crate::plugins::platform::shadow`]) run [`as_shadow`]: in a share of their own
//! (and their primitives in permits of their own), so a candidate costs the shadow budget,
//! never a slot of the requests being served. It starts on the shadow thread (nice 19) and, past
//! its first tick, finishes on the guest threads as any call does: run wholly at nice 19 on a
//! busy machine, a candidate ran out of its time limit waiting for CPU and was counted failed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// How many of one engine's calls may run at once.
#[derive(Debug, Clone)]
pub struct Share {
    permits: Arc<Semaphore>,
}

impl Share {
    /// A share of `size` calls at once (at least one).
    pub fn new(size: usize) -> Share {
        Share {
            permits: Arc::new(Semaphore::new(size.max(1))),
        }
    }

    /// Whether a call now would have to wait for one of the share's slots.
    pub fn full(&self) -> bool {
        self.permits.available_permits() == 0
    }
}

tokio::task_local! {
    /// Set for the calls a shadow's task makes.
    static SHADOW: ();
}

/// Runs `shadow` (a shadow candidate's calls) marked as a shadow's: [`in_shadow`] holds inside.
pub fn as_shadow<F: Future>(shadow: F) -> impl Future<Output = F::Output> {
    SHADOW.scope((), shadow)
}

/// Whether the running task is a shadow's ([`as_shadow`]).
pub fn in_shadow() -> bool {
    SHADOW.try_with(|_| ()).is_ok()
}

/// Why a call was stopped from outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// It ran past its wall-clock bound.
    WallClock,
    /// Its task on the guest threads failed (a panic), as tokio tells it.
    TaskFailed(String),
}

/// Runs one plugin call (`call`: taking an instance, calling it, finishing) within `share`:
/// here until the guest first yields, then on the `guests` threads, in the caller's span;
/// stopped at `wall`.
/// Dropping the returned future (the client went away) stops the call at its next yield.
pub async fn run<T: Send + 'static>(
    guests: &Handle,
    share: &Share,
    wall: Duration,
    call: impl Future<Output = T> + Send + 'static,
) -> Result<T, Stopped> {
    // The semaphore is never closed, so this waits for a permit and gets one.
    let permit = Arc::clone(&share.permits).acquire_owned().await;
    // The call keeps the caller's span wherever it runs: what the guest logs names the request
    // (its inference id) on a guest thread too.
    let call = call.instrument(tracing::Span::current());
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
                Err(error) => return Err(Stopped::TaskFailed(error.to_string())),
            }
        }
    };
    outcome.map_err(|_elapsed| Stopped::WallClock)
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

    use super::{Share, Stopped, run};

    const LONG: Duration = Duration::from_secs(60);

    fn guests() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("test-guest")
            .enable_all()
            .build()
            .unwrap()
    }

    fn thread_name() -> String {
        std::thread::current().name().unwrap_or("").to_owned()
    }

    #[tokio::test]
    async fn a_short_call_runs_in_place_and_a_long_one_moves_to_the_guest_threads() {
        let guests = guests();
        let share = Share::new(1);
        let here = thread_name();
        let short = run(guests.handle(), &share, LONG, async { thread_name() }).await;
        assert_eq!(short, Ok(here.clone()));
        let long = run(guests.handle(), &share, LONG, async {
            let before = thread_name();
            tokio::task::yield_now().await;
            (before, thread_name())
        })
        .await
        .unwrap();
        assert_eq!(long.0, here, "it starts in place");
        assert_eq!(long.1, "test-guest", "and ends on a guest thread");
        guests.shutdown_background();
    }

    /// A call moved to the guest threads still runs in the caller's span, so what its guest
    /// logs there names the request. (It did not, and a guest's output lost its inference id
    /// whenever its call was slow to start.)
    #[tokio::test]
    async fn a_moved_call_keeps_the_callers_span() {
        use tracing::Instrument;
        // The only subscriber of this test binary (spans are disabled without one).
        static SUBSCRIBER: std::sync::Once = std::sync::Once::new();
        SUBSCRIBER.call_once(|| {
            tracing::subscriber::set_global_default(tracing_subscriber::registry())
                .expect("no other global subscriber in the unit tests");
        });
        let guests = guests();
        let share = Share::new(1);
        let span = tracing::info_span!("request", inference_id = "moved-1");
        let seen = run(guests.handle(), &share, LONG, async {
            tokio::task::yield_now().await;
            let name = thread_name();
            (name, tracing::Span::current().metadata().map(|m| m.name()))
        })
        .instrument(span)
        .await
        .unwrap();
        assert_eq!(seen, ("test-guest".to_owned(), Some("request")));
        guests.shutdown_background();
    }

    #[tokio::test]
    async fn a_shadows_task_is_marked_as_one_and_no_other_is() {
        assert!(!super::in_shadow());
        assert!(super::as_shadow(async { super::in_shadow() }).await);
        let spawned = tokio::spawn(async { super::in_shadow() });
        assert!(
            !spawned.await.unwrap(),
            "a task of its own is not the shadow's"
        );
    }

    #[tokio::test]
    async fn an_engine_runs_no_more_calls_at_once_than_its_share() {
        let guests = guests();
        let share = Share::new(2);
        assert_eq!(Share::new(0).permits.available_permits(), 1);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let call = || {
            let (running, most) = (Arc::clone(&running), Arc::clone(&most));
            run(guests.handle(), &share, LONG, async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                running.fetch_sub(1, Ordering::SeqCst);
            })
        };
        let outcomes = tokio::join!(call(), call(), call(), call(), call(), call());
        let outcomes = [
            outcomes.0, outcomes.1, outcomes.2, outcomes.3, outcomes.4, outcomes.5,
        ];
        assert!(outcomes.iter().all(|outcome| *outcome == Ok(())));
        assert_eq!(most.load(Ordering::SeqCst), 2);
        guests.shutdown_background();
    }

    #[tokio::test]
    async fn a_call_waiting_in_the_host_is_stopped_by_the_wall_clock() {
        let guests = guests();
        let share = Share::new(1);
        let started = std::time::Instant::now();
        let outcome = run(guests.handle(), &share, Duration::from_millis(50), async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        })
        .await;
        assert_eq!(outcome, Err(Stopped::WallClock));
        assert!(started.elapsed() < LONG);
        guests.shutdown_background();
    }

    #[tokio::test]
    async fn a_call_nobody_waits_for_is_stopped() {
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let guests = guests();
        let share = Share::new(1);
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = Flag(Arc::clone(&dropped));
        let call = run(guests.handle(), &share, LONG, async move {
            let _flag = flag;
            loop {
                tokio::task::yield_now().await;
            }
        });
        let abandoned = tokio::time::timeout(Duration::from_millis(20), call).await;
        assert!(abandoned.is_err(), "the call was still running");
        for _ in 0..500 {
            if dropped.load(Ordering::SeqCst) {
                guests.shutdown_background();
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the abandoned call still runs");
    }

    #[tokio::test]
    async fn a_call_that_panics_on_the_guest_threads_is_a_failure_not_a_crash() {
        let guests = guests();
        let share = Share::new(1);
        let outcome: Result<(), Stopped> = run(guests.handle(), &share, LONG, async {
            tokio::task::yield_now().await;
            panic!("a bug in a call");
        })
        .await;
        assert!(
            matches!(outcome, Err(Stopped::TaskFailed(_))),
            "{outcome:?}"
        );
        // The share's permit came back with the failed task.
        let after = run(guests.handle(), &share, LONG, async { 7 }).await;
        assert_eq!(after, Ok(7));
        guests.shutdown_background();
    }
}

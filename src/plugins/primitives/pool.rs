//! Where the host's image and text primitives run (`images.to-tensor`, `text.tokenize`,
//! `text.detokenize`): native work trident does on a guest's behalf, which the epoch cannot
//! stop (it counts guest code only).
//!
//! - **Off the serving and guest threads.** Each primitive runs on a primitive thread of its
//!   own (started as needed, gone after 10 s unused); the guest's call waits for it without
//!   holding a thread, so neither a connection nor another plugin's call waits behind it.
//! - **Within the call's deadline.** The guest's call is answered when its time limit ends
//!   (504), whether or not the primitive has; the work checks the deadline between its steps
//!   (images, texts) and stops there. A step that cannot be cut (one image's decoding, one
//!   text's tokenizer) and outlasts the deadline is *abandoned*: its thread drops to the lowest
//!   CPU priority (nice 19), runs on what serving leaves, and ends when the step does (a
//!   reniced thread is never reused).
//! - **Counted against its engine.** Each engine has as many primitive permits as its share
//!   of calls ([`PrimitiveShare`]); a primitive holds one until its work has ended, abandoned
//!   or not. So a tenant whose tokenizer or images outlast their deadline runs out of its own
//!   permits (its next calls wait, within their deadlines) and never another tenant's.
//! - **A shadow's in a share of its own.** A shadow candidate's primitives hold permits of its
//!   engine's shadow budget ([`crate::plugins::runtime::scheduler::as_shadow`]), never one a served call needs.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

/// How long a primitive thread waits for work before it ends.
const IDLE: Duration = Duration::from_secs(10);

/// The nice value of a thread whose work was abandoned.
const ABANDONED_NICE: i32 = 19;

/// How many primitives of one engine may run, or be left running, at once.
#[derive(Debug, Clone)]
pub struct PrimitiveShare {
    permits: Arc<Semaphore>,
}

impl PrimitiveShare {
    /// A share of `size` primitives at once (at least one).
    pub fn new(size: usize) -> PrimitiveShare {
        PrimitiveShare {
            permits: Arc::new(Semaphore::new(size.max(1))),
        }
    }

    /// How many of the share's permits are free now (for tests and metrics).
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }
}

/// Why a primitive gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unanswered {
    /// The call's deadline came first (waiting for a permit, or working).
    Deadline,
    /// The work panicked: a bug in trident, reported as the call's failure.
    Panicked(String),
}

/// What a primitive's work may ask while it runs.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    deadline: Instant,
}

impl Budget {
    /// Whether the call's deadline has passed: the work should stop at its next step.
    pub fn exhausted(&self) -> bool {
        Instant::now() >= self.deadline
    }
}

/// Runs `work` on a primitive thread within `share`, answering by `deadline`: its value, or
/// [`Unanswered`] (the work then goes on, reniced, until it ends, holding its permit).
pub async fn run<T: Send + 'static>(
    share: &PrimitiveShare,
    deadline: Instant,
    work: impl FnOnce(Budget) -> T + Send + 'static,
) -> Result<T, Unanswered> {
    let deadline_tokio = tokio::time::Instant::from_std(deadline);
    let permit =
        match tokio::time::timeout_at(deadline_tokio, Arc::clone(&share.permits).acquire_owned())
            .await
        {
            Ok(Ok(permit)) => permit,
            // The semaphore is never closed; a closed one is as good as no permit in time.
            Ok(Err(_)) | Err(_) => return Err(Unanswered::Deadline),
        };
    let job = Arc::new(Job::default());
    let (answer, answered) = tokio::sync::oneshot::channel();
    let budget = Budget { deadline };
    let queued = Queued {
        job: Arc::clone(&job),
        run: Box::new(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(budget)))
                .map_err(|panic| {
                    panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".to_owned())
                });
            // The work has ended: its permit goes back before the answer does.
            drop(permit);
            // The caller may have stopped waiting: then nobody takes the answer.
            let _ = answer.send(outcome);
        }),
    };
    pool().submit(queued);
    // Abandons the job if the caller stops waiting for any reason: its deadline, or the
    // call itself dropped (the client left, the wall clock).
    let mut guard = AbandonOnDrop(Some(job));
    match tokio::time::timeout_at(deadline_tokio, answered).await {
        Ok(Ok(outcome)) => {
            guard.0 = None;
            outcome.map_err(Unanswered::Panicked)
        }
        Ok(Err(_dropped)) => Err(Unanswered::Panicked(
            "the primitive's thread ended without an answer".into(),
        )),
        Err(_elapsed) => Err(Unanswered::Deadline),
    }
}

/// Abandons its job when dropped, unless taken.
struct AbandonOnDrop(Option<Arc<Job>>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        if let Some(job) = self.0.take() {
            job.abandon();
        }
    }
}

/// Where one job stands.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Waiting for a thread.
    #[default]
    Queued,
    /// Running on the thread with this id.
    Running(rustix::thread::Pid),
    /// Ended, answered or not.
    Done,
    /// Nobody waits for it any more; `reniced`: its thread was lowered while it ran.
    Abandoned { reniced: bool },
}

#[derive(Debug, Default)]
struct Job {
    stage: Mutex<Stage>,
}

impl Job {
    fn stage(&self) -> std::sync::MutexGuard<'_, Stage> {
        self.stage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Nobody waits for the job: a queued one is skipped, a running one's thread reniced.
    /// The stage is changed under its lock, so the thread reniced is the one running it.
    fn abandon(&self) {
        let mut stage = self.stage();
        match *stage {
            Stage::Queued => *stage = Stage::Abandoned { reniced: false },
            Stage::Running(thread) => {
                let reniced =
                    rustix::process::setpriority_process(Some(thread), ABANDONED_NICE).is_ok();
                tracing::warn!(
                    "a host primitive outlasted its call's deadline: it finishes at the lowest \
                     priority, holding its engine's permit"
                );
                *stage = Stage::Abandoned { reniced };
            }
            Stage::Done | Stage::Abandoned { .. } => {}
        }
    }

    /// The job starts on `thread`; false when it was abandoned first (skip it).
    fn start(&self, thread: rustix::thread::Pid) -> bool {
        let mut stage = self.stage();
        match *stage {
            Stage::Queued => {
                *stage = Stage::Running(thread);
                true
            }
            _ => false,
        }
    }

    /// The job ended; true when its thread may have been reniced (it must not be reused).
    fn end(&self) -> bool {
        let mut stage = self.stage();
        match *stage {
            Stage::Abandoned { reniced } => reniced,
            _ => {
                *stage = Stage::Done;
                false
            }
        }
    }
}

struct Queued {
    job: Arc<Job>,
    run: Box<dyn FnOnce() + Send>,
}

/// The process's primitive threads.
struct Pool {
    state: Mutex<PoolState>,
    work: Condvar,
}

#[derive(Default)]
struct PoolState {
    queue: VecDeque<Queued>,
    /// Threads waiting for a job.
    idle: usize,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        state: Mutex::new(PoolState::default()),
        work: Condvar::new(),
    })
}

impl Pool {
    fn state(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `queued`, waking an idle thread or, when every idle thread has a queued job
    /// already, starting one. Threads are bounded by the permits of every engine: each queued
    /// job holds one.
    fn submit(&'static self, queued: Queued) {
        let mut state = self.state();
        state.queue.push_back(queued);
        if state.queue.len() <= state.idle {
            self.work.notify_one();
            return;
        }
        drop(state);
        let started = std::thread::Builder::new()
            .name("trident-primitive".into())
            .spawn(move || self.serve());
        if let Err(error) = started {
            // Without a new thread the job waits for one that is busy now; its caller's
            // deadline bounds the wait.
            tracing::error!(%error, "cannot start a primitive thread");
        }
    }

    /// A primitive thread: runs queued jobs until it has waited [`IDLE`] for one, or until its
    /// job was abandoned (its priority may have been lowered).
    fn serve(&self) {
        let thread = rustix::thread::gettid();
        loop {
            let queued = {
                let mut state = self.state();
                loop {
                    if let Some(queued) = state.queue.pop_front() {
                        break queued;
                    }
                    state.idle += 1;
                    let (next, waited) = self
                        .work
                        .wait_timeout(state, IDLE)
                        .unwrap_or_else(|p| p.into_inner());
                    state = next;
                    state.idle -= 1;
                    if waited.timed_out() && state.queue.is_empty() {
                        return;
                    }
                }
            };
            if queued.job.start(thread) {
                (queued.run)();
            } else {
                drop(queued.run);
            }
            if queued.job.end() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nice() -> i32 {
        rustix::process::getpriority_process(None).unwrap()
    }

    #[tokio::test]
    async fn work_runs_on_a_primitive_thread_and_answers() {
        let share = PrimitiveShare::new(1);
        let deadline = Instant::now() + Duration::from_secs(5);
        let name = run(&share, deadline, |_| {
            std::thread::current().name().map(str::to_owned)
        })
        .await;
        assert_eq!(name, Ok(Some("trident-primitive".to_owned())));
        assert_eq!(share.available(), 1);
    }

    /// A step that outlasts its deadline is answered at the deadline; its thread is lowered,
    /// keeps its engine's permit until it ends, and is not used again.
    #[tokio::test]
    async fn work_past_its_deadline_is_abandoned_reniced_and_keeps_its_permit() {
        let share = PrimitiveShare::new(1);
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (seen, niceness) = std::sync::mpsc::channel::<(i32, rustix::thread::Pid)>();
        let started = Instant::now();
        let outcome = run(
            &share,
            Instant::now() + Duration::from_millis(50),
            move |_| {
                released.recv().unwrap();
                seen.send((nice(), rustix::thread::gettid())).unwrap();
            },
        )
        .await;
        assert_eq!(outcome, Err(Unanswered::Deadline));
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(share.available(), 0, "the abandoned work holds its permit");
        // The next call of the engine waits for the permit within its own deadline.
        let next = run(&share, Instant::now() + Duration::from_millis(20), |_| ()).await;
        assert_eq!(next, Err(Unanswered::Deadline));
        release.send(()).unwrap();
        let (value, abandoned_thread) = niceness.recv().unwrap();
        assert_eq!(value, ABANDONED_NICE);
        for _ in 0..500 {
            if share.available() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(
            share.available(),
            1,
            "the permit comes back when the work ends"
        );
        let after = run(&share, Instant::now() + Duration::from_secs(5), |_| {
            (nice(), rustix::thread::gettid())
        })
        .await
        .unwrap();
        assert_eq!(after.0, 0, "later work runs at the serving priority");
        assert_ne!(after.1, abandoned_thread, "on another thread");
    }

    #[tokio::test]
    async fn the_budget_tells_the_work_its_deadline_passed() {
        let share = PrimitiveShare::new(1);
        let steps = run(
            &share,
            Instant::now() + Duration::from_millis(30),
            |budget| {
                let mut steps = 0;
                while !budget.exhausted() && steps < 1000 {
                    std::thread::sleep(Duration::from_millis(1));
                    steps += 1;
                }
                steps
            },
        )
        .await;
        // Answered at the deadline or just before it: either way it stopped itself.
        if let Ok(steps) = steps {
            assert!(steps < 1000);
        }
        for _ in 0..500 {
            if share.available() == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!("the work did not stop at its deadline");
    }

    #[tokio::test]
    async fn a_panic_is_a_failure_and_the_thread_serves_on() {
        let share = PrimitiveShare::new(1);
        let deadline = Instant::now() + Duration::from_secs(5);
        let outcome: Result<(), _> = run(&share, deadline, |_| panic!("a bug")).await;
        assert_eq!(outcome, Err(Unanswered::Panicked("a bug".into())));
        assert_eq!(run(&share, deadline, |_| 7).await, Ok(7));
    }
}

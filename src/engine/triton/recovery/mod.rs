//! Models whose backend process died, brought back by the engine itself.
//!
//! Triton 2.51's python backend runs each model instance in a stub process. When that process
//! dies (killed by a signal, or crashed by what it was sent), the backend keeps the model
//! `READY` while every request to the instance fails with `Stub process '<instance>' is not
//! healthy.`, and it never starts the process again. What the core offers does not help
//! directly: a load of a loaded, unchanged model does nothing, and an unload waits forever on
//! the dead process (its finalize message is never answered). So trident:
//!
//! 1. **notices** a death two ways: a request fails with that message naming an instance that
//!    has no live process ([`Recovery::on_inference_error`]), or the [`watch`] thread (a scan of
//!    this process's children each second) sees a stub it knew become a zombie or vanish while
//!    its model is still `READY`;
//! 2. **reloads** the model on the [`reload`] thread: the model is loaded again with its own
//!    configuration as an override, plus a parameter `trident_recovery` that changes each time,
//!    so the core always counts it as a change and makes new instances with new processes
//!    (requests already queued on the old instances fail; the new ones serve). The attempt
//!    succeeds when the model is `READY` and every instance with a live stub has a new one (when
//!    only some processes died, the old generation's live ones stay, idle, until trident exits:
//!    the core never finishes retiring a generation with a dead process; the watcher leaves
//!    them alone); up to [`reload::ATTEMPTS`] tries, [`reload::RETRY_PAUSE`] apart;
//! 3. **tells the truth** through [`Recovery::health`]: while a model is being reloaded and after
//!    all attempts failed, the engine reports it, and `/ping` fails with the reason. A recovery
//!    is bounded: one that has not finished within its deadline (the model load timeout; the
//!    core's load call can block for good, e.g. on a lock a killed stub held) counts as failed.
//!    A failed recovery is reported by [`Recovery::cannot_recover`]: a supervised serving
//!    process then asks its supervisor for a new process (`crate::supervisor`), with every
//!    model; an unsupervised one keeps failing `/ping` so SageMaker replaces the instance. A
//!    load on purpose clears a failure;
//! 4. **cleans up** what it can: the watcher removes the name of a dead stub's shared memory
//!    region (which the backend removes only when it finishes tearing the instance down, never
//!    for a dead one), so the region does not outlive trident in `/dev/shm`. It learns each
//!    region from the stub's command line while the stub lives: it learns the stubs at start and
//!    right after every load and reload, before the load returns (so before `/ping` can say the
//!    model is ready), so only a stub that dies during its own load goes unnoticed by the
//!    watcher (its load then fails, or its first request notices).
//!
//! A model unloaded on purpose (`Engine::unload_model`) is never brought back, and a recovery
//! never runs beside a load or unload of the same model: all take the model's lock.

mod reload;
mod watch;

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::server::Server;
use crate::engine::processes::{self, model_of_instance};

/// What the python backend says about an instance whose process is gone: `Stub process
/// '<instance>' is not healthy.`, or the same without the instance's name.
const DEAD_PROCESS: (&str, &str) = ("Stub process", "is not healthy");

/// Whether a message says a python backend process is gone; with the instance it names.
fn dead_process(message: &str) -> Option<Option<&str>> {
    let start = message.find(DEAD_PROCESS.0)? + DEAD_PROCESS.0.len();
    let between = &message[start..start + message[start..].find(DEAD_PROCESS.1)?];
    Some(
        between
            .trim()
            .strip_prefix('\'')
            .and_then(|s| s.strip_suffix('\'')),
    )
}

/// Where a model stands after its process died.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Lost {
    /// Being reloaded, since then.
    Reloading(Instant),
    /// Every attempt failed; the reason of the last.
    Failed(String),
}

/// Why `model` counts as not recoverable, if it does.
fn unrecovered(model: &str, lost: &Lost, deadline: Duration) -> Option<String> {
    match lost {
        Lost::Failed(why) => Some(format!(
            "model {model} lost its process and could not be reloaded: {why}"
        )),
        Lost::Reloading(since) if since.elapsed() > deadline => Some(format!(
            "model {model} lost its process and its reload has not finished within {} s",
            deadline.as_secs()
        )),
        Lost::Reloading(_) => None,
    }
}

struct State {
    lost: HashMap<String, Lost>,
    /// Models unloaded on purpose: not to be brought back.
    unwanted: HashSet<String>,
    /// How many times each model was reloaded: the watcher forgets the processes it saw
    /// before a reload.
    reloads: HashMap<String, u64>,
    /// One lock per model, taken by loads, unloads and recoveries of that model.
    locks: HashMap<String, Arc<Mutex<()>>>,
    /// How long a recovery may take, all attempts together, before it counts as failed.
    deadline: Duration,
    /// Live processes of instances a reload replaced (the core never retires them), with their
    /// shared memory regions: not watched for deaths, only for their end (then forgotten, and
    /// the region's name removed, before the pid can be reused).
    retired: HashMap<u32, Option<String>>,
    /// Models being loaded again on purpose (a new configuration): while the core starts the
    /// new instances (and a process of its own to complete the configuration) and ends the old
    /// ones, no end of their processes is a death.
    replacing: HashSet<String>,
}

impl Default for State {
    fn default() -> State {
        State {
            lost: HashMap::new(),
            unwanted: HashSet::new(),
            reloads: HashMap::new(),
            locks: HashMap::new(),
            deadline: DEFAULT_DEADLINE,
            retired: HashMap::new(),
            replacing: HashSet::new(),
        }
    }
}

/// How long a recovery may take unless told otherwise (`trident serve` sets its model load
/// timeout, whose default this is).
const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);

/// The engine's recovery of models whose process died. Shared by the engine's clones and its
/// two threads.
pub struct Recovery {
    state: Mutex<State>,
    /// Models to reload, for the reload thread.
    requests: Mutex<Sender<String>>,
    /// The stub processes the watcher knows, by pid.
    watched: Mutex<HashMap<u32, watch::Seen>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Recovery {
    /// Starts the reload thread and the watcher for `server`; both hold it weakly and end
    /// when the server is dropped.
    pub fn start(server: &Arc<Server>) -> Arc<Recovery> {
        let (sender, receiver) = channel();
        let recovery = Arc::new(Recovery {
            state: Mutex::default(),
            requests: Mutex::new(sender),
            watched: Mutex::default(),
        });
        // The models loaded at start: their stubs are known before anything can be served.
        watch::learn_now(server, &recovery);
        type Work = Box<dyn FnOnce() + Send>;
        let threads: [(&str, Work); 2] = [
            ("trident-reload", {
                let (server, recovery) = (Arc::downgrade(server), Arc::downgrade(&recovery));
                Box::new(move || reload::run(receiver, server, recovery))
            }),
            ("trident-watch", {
                let (server, recovery) = (Arc::downgrade(server), Arc::downgrade(&recovery));
                Box::new(move || watch::run(server, recovery))
            }),
        ];
        for (name, work) in threads {
            if let Err(error) = std::thread::Builder::new().name(name.into()).spawn(work) {
                tracing::error!(%error, thread = name, "cannot start a recovery thread");
            }
        }
        recovery
    }

    /// The lock of `model`'s loads, unloads and recoveries.
    pub fn model_lock(&self, model: &str) -> Arc<Mutex<()>> {
        Arc::clone(lock(&self.state).locks.entry(model.to_owned()).or_default())
    }

    /// Drops the lock of `model`, unloaded, unless someone holds or waits for it: the table
    /// holds locks only for names in use, not for every name ever loaded.
    pub fn forget_lock(&self, model: &str) {
        let mut state = lock(&self.state);
        if state
            .locks
            .get(model)
            .is_some_and(|held| Arc::strong_count(held) == 1)
        {
            state.locks.remove(model);
        }
    }

    /// Looks at an inference error of a request to `model`: when it says an instance's process
    /// is gone, and that instance has no live process now (a request queued on an instance
    /// already replaced says so too), its model is reloaded.
    pub fn on_inference_error(&self, model: &str, message: &str) {
        let Some(instance) = dead_process(message) else {
            return;
        };
        if let Some(instance) = instance
            && processes::live_stubs()
                .iter()
                .any(|s| s.instance == instance)
        {
            return;
        }
        // The instance's own model: the request's, or (an ensemble's step) one its name says.
        let owner = match instance {
            Some(instance) if !processes::is_instance_of(instance, model) => {
                model_of_instance(instance).unwrap_or(model)
            }
            _ => model,
        };
        self.report(owner, message);
    }

    /// Asks for `model` to be reloaded, unless it is being reloaded already or could not be
    /// (then only a load on purpose tries again).
    fn report(&self, model: &str, why: &str) {
        {
            let mut state = lock(&self.state);
            if state.lost.contains_key(model) || state.unwanted.contains(model) {
                return;
            }
            state
                .lost
                .insert(model.to_owned(), Lost::Reloading(Instant::now()));
        }
        tracing::warn!(
            model,
            why,
            "a process of the model died; reloading the model"
        );
        let _ = lock(&self.requests).send(model.to_owned());
    }

    /// A load of `model` through the engine: it is wanted, and a failure to recover it is
    /// outdated.
    pub fn loaded_on_purpose(&self, model: &str) {
        let mut state = lock(&self.state);
        state.unwanted.remove(model);
        if matches!(state.lost.get(model), Some(Lost::Failed(_))) {
            state.lost.remove(model);
        }
    }

    /// `model` is about to be loaded again on purpose with a new configuration: its processes
    /// now are being replaced, not dying, and so are those the core starts and ends meanwhile
    /// (until [`Recovery::reloaded_on_purpose`]).
    pub fn reloading_on_purpose(&self, model: &str) {
        self.loaded_on_purpose(model);
        lock(&self.state).replacing.insert(model.to_owned());
        let replaced: Vec<processes::StubProcess> = processes::live_stubs()
            .into_iter()
            .filter(|stub| stub.serves(model))
            .collect();
        self.retire(&replaced.iter().collect::<Vec<_>>());
    }

    /// The on-purpose reload of `model` on `server` has finished: what the watcher learned
    /// meanwhile is forgotten (the count moves on), and it learns the new processes now.
    pub fn reloaded_on_purpose(&self, model: &str, server: &Server) {
        self.next_reload(model);
        lock(&self.state).replacing.remove(model);
        self.learn_processes(server);
    }

    fn is_replacing(&self, model: &str) -> bool {
        lock(&self.state).replacing.contains(model)
    }

    /// A load (on purpose, or a reload) on `server` has finished: the watcher learns the new
    /// processes and their regions now, before the load returns, rather than at its next scan.
    pub fn learn_processes(&self, server: &Server) {
        watch::learn_now(server, self);
    }

    /// The watcher's stubs, locked (before `state`, never while holding it).
    fn watched(&self) -> MutexGuard<'_, HashMap<u32, watch::Seen>> {
        lock(&self.watched)
    }

    /// An unload of `model` through the engine: it is not to be brought back.
    pub fn unloaded_on_purpose(&self, model: &str) {
        let mut state = lock(&self.state);
        state.unwanted.insert(model.to_owned());
        if matches!(state.lost.get(model), Some(Lost::Failed(_))) {
            state.lost.remove(model);
        }
    }

    /// `Err` with why while a model is being reloaded, or after it could not be.
    pub fn health(&self) -> Result<(), String> {
        let state = lock(&self.state);
        let mut lost: Vec<_> = state.lost.iter().collect();
        lost.sort_by(|a, b| a.0.cmp(b.0));
        match lost.first() {
            None => Ok(()),
            Some((model, lost)) => {
                Err(unrecovered(model, lost, state.deadline).unwrap_or_else(|| {
                    format!("model {model} is being reloaded: a process of it died")
                }))
            }
        }
    }

    /// Why a model cannot be brought back in this process, if one cannot: every attempt
    /// failed, or the reload has not finished within the deadline (the core may never return
    /// from it). A supervised serving process then asks to be replaced.
    pub fn cannot_recover(&self) -> Option<String> {
        let state = lock(&self.state);
        let mut lost: Vec<_> = state.lost.iter().collect();
        lost.sort_by(|a, b| a.0.cmp(b.0));
        lost.into_iter()
            .find_map(|(model, lost)| unrecovered(model, lost, state.deadline))
    }

    /// Sets how long a recovery may take before it counts as failed.
    pub fn set_deadline(&self, deadline: Duration) {
        lock(&self.state).deadline = deadline;
    }

    /// Processes of replaced instances that live on: the watcher does not take their end for
    /// a death of their model.
    fn retire(&self, stubs: &[&processes::StubProcess]) {
        let mut state = lock(&self.state);
        for stub in stubs {
            state.retired.insert(stub.pid, stub.shm_region.clone());
        }
    }

    fn is_retired(&self, pid: u32) -> bool {
        lock(&self.state).retired.contains_key(&pid)
    }

    /// Forgets the retired processes that are no longer `alive`; returns them with their
    /// regions.
    fn take_ended_retired(&self, alive: impl Fn(u32) -> bool) -> Vec<(u32, Option<String>)> {
        let mut state = lock(&self.state);
        state.retired.extract_if(|&pid, _| !alive(pid)).collect()
    }

    fn is_lost(&self, model: &str) -> bool {
        lock(&self.state).lost.contains_key(model)
    }

    fn is_unwanted(&self, model: &str) -> bool {
        lock(&self.state).unwanted.contains(model)
    }

    fn reloads(&self, model: &str) -> u64 {
        lock(&self.state).reloads.get(model).copied().unwrap_or(0)
    }

    /// Counts a reload of `model` about to start; returns its number.
    fn next_reload(&self, model: &str) -> u64 {
        let mut state = lock(&self.state);
        let count = state.reloads.entry(model.to_owned()).or_default();
        *count += 1;
        *count
    }

    fn finish(&self, model: &str, outcome: Result<(), String>) {
        let mut state = lock(&self.state);
        match outcome {
            Ok(()) => state.lost.remove(model),
            Err(why) => state.lost.insert(model.to_owned(), Lost::Failed(why)),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recovery_fails_when_every_attempt_failed_or_it_outlived_its_deadline() {
        let deadline = Duration::from_secs(10);
        let fresh = Lost::Reloading(Instant::now());
        assert_eq!(unrecovered("m", &fresh, deadline), None);
        if let Some(long_ago) = Instant::now().checked_sub(Duration::from_secs(11)) {
            let stuck = unrecovered("m", &Lost::Reloading(long_ago), deadline).unwrap();
            assert!(
                stuck.contains("model m") && stuck.contains("has not finished within 10 s"),
                "{stuck}"
            );
        }
        let failed = unrecovered("m", &Lost::Failed("load: no".into()), deadline).unwrap();
        assert!(
            failed.contains("could not be reloaded: load: no"),
            "{failed}"
        );
    }

    #[test]
    fn the_python_backend_messages_of_a_dead_process_are_recognised() {
        assert_eq!(
            dead_process("Stub process 'victim_0_2' is not healthy."),
            Some(Some("victim_0_2"))
        );
        assert_eq!(dead_process("Stub process is not healthy."), Some(None));
        assert_eq!(dead_process("Stub process 'x' started"), None);
        assert_eq!(dead_process("the input is not healthy"), None);
        assert_eq!(dead_process(""), None);
    }
}

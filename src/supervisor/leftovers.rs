//! What a serving process leaves when it dies: its backends' processes (a python stub holds its
//! model's memory, on a GPU instance GPU memory too) and their shared memory regions. All must
//! go before the next serving process starts, or every restart would leak a model's worth.
//!
//! The supervisor is a child subreaper, so when the serving process dies its processes are
//! orphaned to the supervisor rather than to init: they are exactly the supervisor's children
//! other than the serving process. Their regions' names are read from the stubs' command lines:
//! those of the stubs alive at the end, and those [`Leftovers::learn`] noted while the serving
//! process ran (a stub may end on its own, once its parent is gone, before it can be read).

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

use crate::engine::processes;

/// How long the supervisor waits for what it ended to be reaped.
const REAP_WITHIN: Duration = Duration::from_secs(10);

/// The shared memory regions of the serving process's stubs, as far as they are known.
#[derive(Debug, Default)]
pub struct Leftovers {
    regions: HashMap<u32, String>,
}

/// What [`Leftovers::clean`] ended and removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Cleaned {
    /// Processes ended (SIGKILL) and reaped.
    pub processes: usize,
    /// Shared memory regions whose names were removed.
    pub regions: usize,
    /// Processes still not reaped after 10 s.
    pub unreaped: usize,
}

impl Leftovers {
    /// Notes the regions of the serving process `serving`'s stubs (it runs each second).
    pub fn learn(&mut self, serving: u32) {
        for pid in processes::children_of(serving) {
            if self.regions.contains_key(&pid) {
                continue;
            }
            if let Some(region) = processes::stub_process(pid).and_then(|s| s.shm_region) {
                self.regions.insert(pid, region);
            }
        }
    }

    /// Ends every process orphaned to the supervisor and reaps it, then removes the regions of
    /// every stub the dead serving process had. Reaps whatever ends meanwhile (the supervisor
    /// may be PID 1 of a container).
    pub fn clean(&mut self) -> Cleaned {
        let mut cleaned = Cleaned::default();
        let mut ended = BTreeSet::new();
        let deadline = Instant::now() + REAP_WITHIN;
        loop {
            let left = processes::children();
            for &pid in &left {
                if let Some(region) = processes::stub_process(pid).and_then(|s| s.shm_region) {
                    self.regions.insert(pid, region);
                }
                if ended.insert(pid) {
                    let killed = Pid::from_raw(i32::try_from(pid).unwrap_or(0))
                        .map(|pid| rustix::process::kill_process(pid, Signal::KILL));
                    if let Some(Err(error)) = killed {
                        tracing::debug!(pid, %error, "ending a leftover process");
                    }
                }
            }
            reap_any();
            if left.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                cleaned.unreaped = left.len();
                tracing::error!(processes = ?left, "leftover processes not reaped within 10 s");
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        cleaned.processes = ended.len().saturating_sub(cleaned.unreaped);
        for (pid, region) in self.regions.drain() {
            match processes::remove_shm_region(&region) {
                Ok(true) => cleaned.regions += 1,
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(pid, region, %error, "cannot remove a leftover shared memory region")
                }
            }
        }
        cleaned
    }
}

/// Reaps every child that has ended, without waiting; returns them with how they ended.
pub fn reap_any() -> Vec<(u32, rustix::process::WaitStatus)> {
    let mut reaped = Vec::new();
    while let Ok(Some((pid, status))) = rustix::process::waitpid(None, WaitOptions::NOHANG) {
        reaped.push((pid.as_raw_nonzero().get().unsigned_abs(), status));
    }
    reaped
}

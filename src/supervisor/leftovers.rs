//! What a serving process leaves when it dies: its backends' processes (a python stub holds its
//! model's memory, on a GPU instance GPU memory too) and their shared memory regions. All must
//! go before the next serving process starts, or every restart would leak a model's worth.
//!
//! The supervisor is a child subreaper, so when the serving process dies its processes are
//! orphaned to the supervisor rather than to init: they are exactly the supervisor's children
//! other than the serving process. Their regions are named with the serving process's own
//! prefix ([`crate::config::process::Supervision::shm_region_prefix`], the python backend's
//! `shm-region-prefix-name`), so every region it made goes by name, however young its stubs
//! were (a crash within a second of starting one), and no other server's region is touched.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

use crate::engine::processes;

/// How long the supervisor waits for what it ended to be reaped.
const REAP_WITHIN: Duration = Duration::from_secs(10);

/// What a serving process may leave: its regions are those named with `region_prefix`.
#[derive(Debug)]
pub struct Leftovers {
    region_prefix: String,
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
    /// What the serving process whose regions start with `region_prefix` may leave.
    pub fn of(region_prefix: String) -> Leftovers {
        Leftovers { region_prefix }
    }

    /// Ends every process orphaned to the supervisor and reaps it, then removes every region
    /// of the serving process. Reaps whatever ends meanwhile (the supervisor may be PID 1 of a
    /// container).
    pub fn clean(&self) -> Cleaned {
        let mut cleaned = Cleaned::default();
        let mut ended = BTreeSet::new();
        let deadline = Instant::now() + REAP_WITHIN;
        loop {
            let left = processes::children();
            for &pid in &left {
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
        match processes::remove_regions_named(&self.region_prefix) {
            Ok(removed) => cleaned.regions = removed,
            Err(error) => tracing::warn!(
                prefix = self.region_prefix,
                %error,
                "cannot remove the dead serving process's shared memory regions"
            ),
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

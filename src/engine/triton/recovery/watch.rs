//! The watcher: notices a python backend process that died before any request does.

use std::collections::HashMap;
use std::sync::Weak;
use std::time::Duration;

use super::super::server::Server;
use super::{Recovery, processes};

/// How often the watcher scans this process's children.
const SCAN_EVERY: Duration = Duration::from_secs(1);

/// A stub process the watcher saw alive.
struct Seen {
    model: String,
    /// The model's reload count when it was seen: a reload replaces it.
    reloads: u64,
    /// Scans in a row that found it dead.
    dead_scans: u32,
    /// Its shared memory region, removed once it is found dead.
    shm_region: Option<String>,
}

/// Forgets a stub the watcher saw: if its process is dead, the name of its shared memory
/// region is removed (see [`processes::remove_shm_region`]).
fn forget(pid: u32, stub: &Seen, alive: bool) {
    let Some(region) = stub.shm_region.as_deref().filter(|_| !alive) else {
        return;
    };
    match processes::remove_shm_region(region) {
        Ok(true) => tracing::info!(
            pid,
            model = stub.model,
            region,
            "removed the shared memory region of a dead python backend process"
        ),
        Ok(false) => {}
        Err(error) => tracing::warn!(
            pid,
            region,
            %error,
            "cannot remove the shared memory region of a dead python backend process"
        ),
    }
}

/// Every [`SCAN_EVERY`], notes the live stub processes of models the core holds (loading ones
/// too: their instances start during the load); one found dead (a zombie, or gone) on two
/// scans in a row while its model is `READY`, not being reloaded and not reloaded since it was
/// seen, is reported. A stub forgotten because its process is dead has its shared memory
/// region's name removed. Ends when the server or recovery is gone.
pub fn run(server: Weak<Server>, recovery: Weak<Recovery>) {
    let mut seen: HashMap<u32, Seen> = HashMap::new();
    // The first scan at once: the stubs of the models loaded at start are known from the start.
    let mut first = true;
    loop {
        if !std::mem::take(&mut first) {
            std::thread::sleep(SCAN_EVERY);
        }
        let (Some(server), Some(recovery)) = (server.upgrade(), recovery.upgrade()) else {
            return;
        };
        let Ok(index) = server.model_index(false) else {
            continue;
        };
        let held: HashMap<String, bool> = index
            .into_iter()
            .filter(|entry| matches!(entry.state.as_deref(), Some("READY" | "LOADING")))
            .map(|entry| {
                let ready = entry.state.as_deref() == Some("READY");
                (entry.name, ready)
            })
            .collect();
        let children = processes::children();
        for &pid in &children {
            if seen.contains_key(&pid) || processes::is_dead(pid) || recovery.is_retired(pid) {
                continue;
            }
            if let Some(stub) = processes::stub_process(pid).filter(|s| held.contains_key(&s.model))
            {
                let reloads = recovery.reloads(&stub.model);
                seen.insert(
                    pid,
                    Seen {
                        model: stub.model,
                        reloads,
                        dead_scans: 0,
                        shm_region: stub.shm_region,
                    },
                );
            }
        }
        seen.retain(|&pid, stub| {
            let alive = children.contains(&pid) && !processes::is_dead(pid);
            let Some(&ready) = held.get(&stub.model) else {
                forget(pid, stub, alive);
                return false; // unloaded
            };
            if recovery.is_lost(&stub.model) || recovery.reloads(&stub.model) != stub.reloads {
                forget(pid, stub, alive);
                return false; // being dealt with, or replaced
            }
            if !ready {
                return true; // still loading: a failed load is the load's to report
            }
            stub.dead_scans = if alive { 0 } else { stub.dead_scans + 1 };
            if stub.dead_scans < 2 {
                return true;
            }
            recovery.report(
                &stub.model,
                &format!("its python backend process {pid} exited"),
            );
            forget(pid, stub, alive);
            false
        });
    }
}

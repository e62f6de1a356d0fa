//! The watcher: notices a python backend process that died before any request does.

use std::collections::{HashMap, HashSet};
use std::sync::Weak;
use std::time::Duration;

use super::super::server::Server;
use super::Recovery;
use crate::engine::processes;

/// How often the watcher scans this process's children.
const SCAN_EVERY: Duration = Duration::from_secs(1);

/// A stub process the watcher saw alive.
pub(super) struct Seen {
    model: String,
    /// The model's reload count when it was seen: a reload replaces it.
    reloads: u64,
    /// Scans in a row that found it dead.
    dead_scans: u32,
    /// Its shared memory region, removed once it is found dead.
    shm_region: Option<String>,
}

/// Forgets a stub the watcher saw: if its process is dead, the name of its shared memory
/// region is removed and, a zombie of this process, it is reaped.
fn forget(pid: u32, stub: &Seen, alive: bool) {
    if let Some(region) = stub.shm_region.as_deref().filter(|_| !alive) {
        remove_region(pid, region);
    }
    if !alive && processes::reap_if_zombie_child(pid) {
        tracing::debug!(
            pid,
            model = stub.model,
            "reaped a dead python backend process"
        );
    }
}

/// Removes the name of dead process `pid`'s shared memory region (see
/// [`processes::remove_shm_region`]).
fn remove_region(pid: u32, region: &str) {
    match processes::remove_shm_region(region) {
        Ok(true) => tracing::info!(
            pid,
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
/// too: their instances start during the load), as [`learn_now`] does at start and after every
/// load; one found dead (a zombie, or gone) on two scans in a row while its model is `READY`,
/// not being reloaded and not reloaded since it was seen, is reported. A stub forgotten because
/// its process is dead has its shared memory region's name removed. Processes a reload retired
/// are not watched for deaths; when one ends, its region's name is removed too. Ends when the
/// server or recovery is gone.
pub fn run(server: Weak<Server>, recovery: Weak<Recovery>) {
    loop {
        std::thread::sleep(SCAN_EVERY);
        let (Some(server), Some(recovery)) = (server.upgrade(), recovery.upgrade()) else {
            return;
        };
        let Some(held) = held_models(&server) else {
            continue;
        };
        let children = processes::children();
        let alive = |pid: u32| children.contains(&pid) && !processes::is_dead(pid);
        for (pid, region) in recovery.take_ended_retired(alive) {
            if let Some(region) = region {
                remove_region(pid, &region);
            }
            processes::reap_if_zombie_child(pid);
        }
        let mut seen = recovery.watched();
        learn(&mut seen, &children, &held, &recovery);
        check(&mut seen, &held, alive, &recovery);
    }
}

/// Notes the live stubs of the models the core holds now, before anything else happens: at
/// start and right after a load or reload, a stub that dies a moment later (before the next
/// regular scan) is one the watcher knows, so its death is noticed and its region removed. A
/// stub first seen dead (a zombie has no command line to say whose it is) is never noticed,
/// and the backend never reaps it nor notices it before a request does.
pub fn learn_now(server: &Server, recovery: &Recovery) {
    if let Some(held) = held_models(server) {
        let children = processes::children();
        learn(&mut recovery.watched(), &children, &held, recovery);
    }
}

/// The models the core holds, `READY` (true) or `LOADING` (false).
fn held_models(server: &Server) -> Option<HashMap<String, bool>> {
    let index = server.model_index(false).ok()?;
    let held = index
        .into_iter()
        .filter(|entry| matches!(entry.state.as_deref(), Some("READY" | "LOADING")))
        .map(|entry| {
            let ready = entry.state.as_deref() == Some("READY");
            (entry.name, ready)
        })
        .collect();
    Some(held)
}

/// Notes the live stubs among `children` that serve a model the core holds and are not known
/// yet (nor retired).
fn learn(
    seen: &mut HashMap<u32, Seen>,
    children: &HashSet<u32>,
    held: &HashMap<String, bool>,
    recovery: &Recovery,
) {
    for &pid in children {
        if seen.contains_key(&pid) || processes::is_dead(pid) || recovery.is_retired(pid) {
            continue;
        }
        let Some(stub) = processes::stub_process(pid) else {
            continue;
        };
        // The held model it serves (the longest name, should `m` and `m_1` both be held).
        let model = held
            .keys()
            .filter(|model| stub.serves(model))
            .max_by_key(|model| model.len())
            .cloned();
        if let Some(model) = model {
            let reloads = recovery.reloads(&model);
            tracing::debug!(pid, model, reloads, "watching a python backend process");
            seen.insert(
                pid,
                Seen {
                    model,
                    reloads,
                    dead_scans: 0,
                    shm_region: stub.shm_region,
                },
            );
        }
    }
}

/// Counts the deaths of the stubs `seen`: one dead on two scans in a row while its model is
/// `READY` and not dealt with is reported; stubs of models unloaded, being reloaded or
/// replaced are forgotten.
fn check(
    seen: &mut HashMap<u32, Seen>,
    held: &HashMap<String, bool>,
    alive: impl Fn(u32) -> bool,
    recovery: &Recovery,
) {
    seen.retain(|&pid, stub| {
        let alive = alive(pid);
        if recovery.is_retired(pid) || recovery.is_replacing(&stub.model) {
            forget(pid, stub, alive);
            return false; // replaced on purpose: its end is no death
        }
        let Some(&ready) = held.get(&stub.model) else {
            forget(pid, stub, alive);
            return false; // unloaded
        };
        if recovery.is_lost(&stub.model) || recovery.reloads(&stub.model) != stub.reloads {
            tracing::debug!(
                pid,
                model = stub.model,
                alive,
                "no longer watching a python backend process: its model is being reloaded"
            );
            forget(pid, stub, alive);
            return false; // being dealt with, or replaced
        }
        if !ready {
            return true; // still loading: a failed load is the load's to report
        }
        stub.dead_scans = if alive { 0 } else { stub.dead_scans + 1 };
        if !alive {
            tracing::debug!(
                pid,
                model = stub.model,
                scans = stub.dead_scans,
                "a watched python backend process is dead"
            );
        }
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

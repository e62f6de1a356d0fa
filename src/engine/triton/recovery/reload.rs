//! The reload thread: models reported dead, one at a time, each reloaded and checked.

use std::sync::Weak;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use super::super::server::Server;
use super::{Recovery, lock};
use crate::engine::processes::{self, StubProcess};

/// How many reloads are tried before the model is reported lost.
pub const ATTEMPTS: u32 = 3;
/// The pause between two attempts.
pub const RETRY_PAUSE: Duration = Duration::from_secs(2);
/// The model parameter that makes each reload's configuration differ from the last.
pub const RELOAD_PARAMETER: &str = "trident_recovery";

/// Reloads each model `receiver` names, until the server or the recovery is gone.
pub fn run(receiver: Receiver<String>, server: Weak<Server>, recovery: Weak<Recovery>) {
    while let Ok(model) = receiver.recv() {
        let (Some(server), Some(recovery)) = (server.upgrade(), recovery.upgrade()) else {
            return;
        };
        let started = Instant::now();
        let model_lock = recovery.model_lock(&model);
        let held = lock(&model_lock);
        let mut outcome = Err("not tried".to_owned());
        for attempt in 1..=ATTEMPTS {
            if recovery.is_unwanted(&model) {
                outcome = Ok(());
                break;
            }
            outcome = reload(&server, &recovery, &model);
            match &outcome {
                Ok(()) => break,
                Err(why) => {
                    tracing::warn!(model, attempt, why, "reloading the model failed");
                    if attempt < ATTEMPTS {
                        std::thread::sleep(RETRY_PAUSE);
                    }
                }
            }
        }
        drop(held);
        recovery.learn_processes(&server);
        match &outcome {
            Ok(()) if recovery.is_unwanted(&model) => {
                tracing::info!(model, "the model was unloaded on purpose; not reloaded");
            }
            Ok(()) => tracing::info!(
                model,
                seconds = started.elapsed().as_secs_f64(),
                "model reloaded after its process died: ready, with new processes"
            ),
            Err(why) => tracing::error!(
                model,
                why,
                "the model could not be reloaded; /ping now fails so the instance is replaced"
            ),
        }
        recovery.finish(&model, outcome);
    }
}

/// One attempt: load the model again with its own configuration as an override, changed by a
/// counter so the core makes new instances, then check it is ready and that every instance
/// with a live process has a new one.
///
/// Old processes may outlive a successful reload: the core retires the old instances after the
/// new ones are ready, and it never finishes retiring a generation in which a process died, so
/// when only some of a model's processes died, their live siblings stay (idle, until trident
/// exits) beside the new instances. What shows a reload that did not happen is an instance
/// served only by old processes.
fn reload(server: &Server, recovery: &Recovery, model: &str) -> Result<(), String> {
    let before: Vec<u32> = processes::live_stubs()
        .into_iter()
        .filter(|s| s.serves(model))
        .map(|s| s.pid)
        .collect();
    let mut config = server
        .model_config(model, None)
        .map_err(|e| format!("reading its configuration: {e}"))?;
    let count = recovery.next_reload(model);
    mark_reload(&mut config, count)?;
    server
        .reload_model_with_config(model, &config.to_string())
        .map_err(|e| format!("load: {e}"))?;
    if !server
        .model_is_ready(model, None)
        .map_err(|e| format!("readiness: {e}"))?
    {
        return Err("loaded but not ready".into());
    }
    let after: Vec<StubProcess> = processes::live_stubs()
        .into_iter()
        .filter(|s| s.serves(model))
        .collect();
    replaced(&before, &after)?;
    let kept: Vec<&StubProcess> = after.iter().filter(|s| before.contains(&s.pid)).collect();
    if !kept.is_empty() {
        recovery.retire(&kept);
        let pids: Vec<u32> = kept.iter().map(|s| s.pid).collect();
        tracing::warn!(
            model,
            processes = ?pids,
            "the replaced instances' live processes stay until trident exits (the core cannot retire a generation in which a process died)"
        );
    }
    Ok(())
}

/// Whether the live stubs `after` a reload show new instances: at least one, and every instance
/// that has a live process from `before` (pids) has a new process too.
fn replaced(before: &[u32], after: &[StubProcess]) -> Result<(), String> {
    if after.is_empty() {
        return Err("ready, but no live process serves it".into());
    }
    let fresh: Vec<&str> = after
        .iter()
        .filter(|s| !before.contains(&s.pid))
        .map(|s| s.instance.as_str())
        .collect();
    let stale = after.iter().find(|s| !fresh.contains(&s.instance.as_str()));
    match stale {
        Some(old) => Err(format!(
            "instance {} has only its old process {}: the model was not reloaded",
            old.instance, old.pid
        )),
        None => Ok(()),
    }
}

/// Sets the reload parameter of a model configuration (Triton's JSON form) to `count`.
fn mark_reload(config: &mut serde_json::Value, count: u64) -> Result<(), String> {
    let object = config
        .as_object_mut()
        .ok_or("its configuration is not a JSON object")?;
    let parameters = object
        .entry("parameters")
        .or_insert_with(|| serde_json::json!({}));
    let parameters = parameters
        .as_object_mut()
        .ok_or("its configuration's parameters are not an object")?;
    parameters.insert(
        RELOAD_PARAMETER.into(),
        serde_json::json!({ "string_value": count.to_string() }),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stub(pid: u32, instance: &str) -> StubProcess {
        StubProcess {
            pid,
            instance: instance.into(),
            shm_region: None,
        }
    }

    #[test]
    fn a_reload_replaced_the_model_when_every_live_instance_has_a_new_process() {
        // All processes died: only new ones.
        assert!(replaced(&[], &[stub(7, "m_0_0"), stub(8, "m_0_1")]).is_ok());
        // One of two died: its live sibling stays beside both new instances.
        let after = [stub(2, "m_0_1"), stub(7, "m_0_0"), stub(8, "m_0_1")];
        assert!(replaced(&[2], &after).is_ok());
        // Nothing new: the core kept the model as it was.
        let kept = replaced(&[2], &[stub(2, "m_0_1")]).unwrap_err();
        assert!(
            kept.contains("instance m_0_1 has only its old process 2"),
            "{kept}"
        );
        // A new process for one instance, none for the other.
        assert!(replaced(&[2, 3], &[stub(2, "m_0_0"), stub(9, "m_0_1")]).is_err());
        assert!(replaced(&[], &[]).unwrap_err().contains("no live process"));
    }

    #[test]
    fn each_reload_changes_the_configuration_and_keeps_the_rest() {
        let mut config = serde_json::json!({
            "name": "affine",
            "parameters": {"scale": {"string_value": "2.0"}},
        });
        mark_reload(&mut config, 1).unwrap();
        let first = config.clone();
        mark_reload(&mut config, 2).unwrap();
        assert_ne!(first, config);
        assert_eq!(config["parameters"]["scale"]["string_value"], "2.0");
        assert_eq!(config["parameters"][RELOAD_PARAMETER]["string_value"], "2");
        let mut bare = serde_json::json!({"name": "m"});
        mark_reload(&mut bare, 7).unwrap();
        assert_eq!(bare["parameters"][RELOAD_PARAMETER]["string_value"], "7");
        assert!(mark_reload(&mut serde_json::json!([]), 1).is_err());
    }
}

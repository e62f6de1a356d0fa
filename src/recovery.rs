//! Recovery of models whose backend process died.
//!
//! When a python model's stub process dies, Triton's python backend keeps the model `READY`
//! while every request to it fails with `Stub process '<instance>' is not healthy.`, and it does
//! not start the process again by itself. trident notices that message on a failed request and
//! reloads the model in the background (`TRITONSERVER_ServerLoadModel` on a loaded model makes
//! new instances; one reload at a time per model). While such a reload is failing, `/ping`
//! reports the endpoint unhealthy so SageMaker replaces the container.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::engine::Engine;

/// What the python backend says about an instance whose process is gone.
const DEAD_PROCESS_MARKERS: [&str; 2] = ["is not healthy", "Stub process"];

/// Whether an inference error says the model's process is gone.
pub fn is_dead_process(message: &str) -> bool {
    DEAD_PROCESS_MARKERS
        .iter()
        .all(|marker| message.contains(marker))
}

/// Models being reloaded, and models whose last reload failed.
#[derive(Default)]
pub struct Recovery {
    state: Mutex<RecoveryState>,
}

#[derive(Default)]
struct RecoveryState {
    reloading: HashSet<String>,
    /// Model → why its last reload failed.
    failed: HashMap<String, String>,
}

impl Recovery {
    fn lock(&self) -> MutexGuard<'_, RecoveryState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Looks at a failed inference of `model`: if its process died, starts a reload unless one
    /// is already running. Returns whether a reload was started.
    pub fn on_inference_error<E: Engine>(
        self: &Arc<Self>,
        engine: &E,
        model: &str,
        message: &str,
    ) -> bool {
        if !is_dead_process(message) || !self.lock().reloading.insert(model.to_owned()) {
            return false;
        }
        tracing::warn!(
            model,
            error = message,
            "the model's process died; reloading the model"
        );
        let (recovery, engine, model) = (Arc::clone(self), engine.clone(), model.to_owned());
        tokio::spawn(async move {
            let outcome = engine.load_model(&model).await;
            let mut state = recovery.lock();
            state.reloading.remove(&model);
            match outcome {
                Ok(()) => {
                    state.failed.remove(&model);
                    tracing::info!(model, "model reloaded after its process died");
                }
                Err(error) => {
                    tracing::error!(model, %error, "reloading the model failed; /ping now fails");
                    state.failed.insert(model, error.message);
                }
            }
        });
        true
    }

    /// The first model whose reload failed, with why; `None` when all is well.
    pub fn unhealthy(&self) -> Option<(String, String)> {
        self.lock()
            .failed
            .iter()
            .next()
            .map(|(model, why)| (model.clone(), why.clone()))
    }

    /// Forgets `model` (it was unloaded on purpose).
    pub fn forget(&self, model: &str) {
        self.lock().failed.remove(model);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_the_python_backend_message_only() {
        assert!(is_dead_process("Stub process 'victim_0_2' is not healthy."));
        assert!(!is_dead_process("Stub process 'x' started"));
        assert!(!is_dead_process("the input is not healthy"));
        assert!(!is_dead_process(""));
    }
}

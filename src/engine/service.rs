//! The [`Engine`] trait: what the layers above (`pipeline`, `http`, `mme`) ask of an inference
//! engine, with no Triton types in sight. [`TritonEngine`](crate::engine::triton::TritonEngine) is the real implementation.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use futures_core::Stream;

use super::{EngineError, InferRequest, InferResponse};

/// A model's state in the engine's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelState {
    /// Loaded and serving inferences.
    Ready,
    /// Being loaded; not serving yet.
    Loading,
    /// Being unloaded; `Unavailable("unloaded")` once done.
    Unloading,
    /// Not serving, with the engine's reason (`unloaded` after an unload, or why a load failed).
    Unavailable(String),
}

impl ModelState {
    /// The state for Triton's index names (`READY`, `LOADING`, `UNLOADING`, `UNAVAILABLE`); a
    /// name the core might add later counts as unavailable, with the name as the reason.
    pub fn from_index(state: &str, reason: &str) -> ModelState {
        match state {
            "READY" => ModelState::Ready,
            "LOADING" => ModelState::Loading,
            "UNLOADING" => ModelState::Unloading,
            "UNAVAILABLE" => ModelState::Unavailable(reason.to_owned()),
            other => ModelState::Unavailable(format!("{other}: {reason}")),
        }
    }

    /// Unloaded on purpose: what an unload waits for.
    pub fn is_unloaded(&self) -> bool {
        matches!(self, ModelState::Unavailable(reason) if reason == "unloaded")
    }
}

/// A stateful model's sequence batcher, as its configuration sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequenceBatching {
    /// How long a sequence may stay idle before the core drops it
    /// (`max_sequence_idle_microseconds`; Triton fills in [`DEFAULT_SEQUENCE_IDLE`] when the
    /// configuration says nothing).
    pub idle_limit: Duration,
    /// How many sequences the model holds at once, when its configuration bounds them: the
    /// direct strategy (Triton's default) has a slot per batch row of each instance
    /// (`max_batch_size`, at least one); the oldest strategy keeps `max_candidate_sequences`
    /// when set. A sequence past them waits in the core's backlog until one ends, unbounded.
    pub slots: Option<usize>,
}

/// How deep ensembles of ensembles are followed for their stateful steps.
pub const MAX_ENSEMBLE_DEPTH: usize = 8;

/// The steps of the ensemble configured by `config` (none when it is no ensemble) that have a
/// sequence batcher, found through nested ensembles down to `depth` levels: each with its
/// batcher and its model's name.
pub fn stateful_steps<E: Engine>(
    engine: &E,
    config: &serde_json::Value,
    depth: usize,
) -> Result<Vec<(SequenceBatching, String)>, EngineError> {
    let Some(steps) = config["ensemble_scheduling"]["step"].as_array() else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    for name in steps.iter().filter_map(|step| step["model_name"].as_str()) {
        let step = engine.model_config(name)?;
        match SequenceBatching::of_config(&step) {
            Some(batching) => found.push((batching, name.to_owned())),
            None if depth > 0 => found.extend(stateful_steps(engine, &step, depth - 1)?),
            None => {}
        }
    }
    Ok(found)
}

/// Triton's `max_sequence_idle_microseconds` when a model's configuration sets none: 1 s.
pub const DEFAULT_SEQUENCE_IDLE: Duration = Duration::from_secs(1);

impl SequenceBatching {
    /// The sequence batcher of a model configuration (Triton's JSON form), if it has one.
    pub fn of_config(config: &serde_json::Value) -> Option<SequenceBatching> {
        let batching = config.get("sequence_batching").filter(|b| b.is_object())?;
        let micros = batching["max_sequence_idle_microseconds"]
            .as_u64()
            .or_else(|| {
                batching["max_sequence_idle_microseconds"]
                    .as_str()?
                    .parse()
                    .ok()
            })
            .filter(|&micros| micros > 0);
        Some(SequenceBatching {
            idle_limit: micros.map_or(DEFAULT_SEQUENCE_IDLE, Duration::from_micros),
            slots: sequence_slots(config, batching),
        })
    }
}

/// A number of Triton's JSON form of a configuration, written as a number or a string.
fn number(value: &serde_json::Value) -> Option<u64> {
    value.as_u64().or_else(|| value.as_str()?.parse().ok())
}

/// [`SequenceBatching::slots`] of `config`, whose sequence batcher is `batching`.
fn sequence_slots(config: &serde_json::Value, batching: &serde_json::Value) -> Option<usize> {
    if let Some(oldest) = batching.get("oldest").filter(|o| o.is_object()) {
        let candidates = number(&oldest["max_candidate_sequences"]).filter(|&n| n > 0)?;
        return usize::try_from(candidates).ok();
    }
    let rows = number(&config["max_batch_size"]).unwrap_or(0).max(1);
    let instances: u64 = match config["instance_group"].as_array() {
        Some(groups) if !groups.is_empty() => groups
            .iter()
            .map(|group| number(&group["count"]).unwrap_or(1))
            .sum(),
        _ => 1,
    };
    usize::try_from(rows.saturating_mul(instances.max(1))).ok()
}

/// What the engine holds on the server's behalf right now; both are zero when idle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InFlight {
    /// Requests submitted and not yet released.
    pub requests: u64,
    /// Output buffers allocated and not yet released.
    pub output_buffers: u64,
}

/// What `/ping` needs the engine to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthCheck {
    /// Running, possibly without ready models (multi-model endpoints).
    Live,
    /// Running with every model ready.
    Ready,
}

/// An inference engine; clones share the same engine.
///
/// Fast calls (health, queries, submitting an inference) are plain methods; calls that wait on
/// model code (load, unload, repository changes) are futures that never block an async worker.
pub trait Engine: Clone + Send + Sync + 'static {
    /// The responses of one inference; dropping it before the end cancels the request.
    type Responses: Stream<Item = Result<InferResponse, EngineError>> + Send + Unpin + 'static;

    /// Whether the engine can serve as `check` asks, or why not. Beyond liveness and readiness
    /// this knows about models that lost a backend process: while one is being reloaded, and
    /// after it could not be, the engine is not healthy.
    fn health(&self, check: HealthCheck) -> Result<(), String>;
    /// Whether the model may send any number of responses per request.
    fn is_decoupled(&self, model: &str) -> Result<bool, EngineError>;
    /// The model's `max_batch_size`: the most rows one request may carry when it is above 0
    /// (0: the model does not batch).
    fn max_batch_size(&self, model: &str) -> Result<u64, EngineError>;
    /// The model's metadata (inputs and outputs with datatypes and shapes).
    fn model_metadata(&self, model: &str) -> Result<serde_json::Value, EngineError>;
    /// The model's configuration, in Triton's JSON form (with what the core filled in).
    fn model_config(&self, model: &str) -> Result<serde_json::Value, EngineError>;
    /// The model's sequence batcher, if it has one (a stateful model: requests carry a
    /// correlation id and start and end flags). An ensemble is stateful when any of its steps
    /// is (the core passes a request's correlation id and flags on to every step): its idle
    /// limit and slots are the smallest of its stateful steps'.
    fn sequence_batching(&self, model: &str) -> Result<Option<SequenceBatching>, EngineError> {
        let config = self.model_config(model)?;
        if let Some(batching) = SequenceBatching::of_config(&config) {
            return Ok(Some(batching));
        }
        let mut combined: Option<SequenceBatching> = None;
        for (step, _) in stateful_steps(self, &config, MAX_ENSEMBLE_DEPTH)? {
            combined = Some(match combined {
                None => step,
                Some(so_far) => SequenceBatching {
                    idle_limit: so_far.idle_limit.min(step.idle_limit),
                    slots: match (so_far.slots, step.slots) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    },
                },
            });
        }
        Ok(combined)
    }
    /// The model's state in the index, `None` when the engine has never heard of it.
    fn model_state(&self, model: &str) -> Result<Option<ModelState>, EngineError>;

    /// Requests and output buffers the engine holds right now.
    fn in_flight(&self) -> InFlight;

    /// Submits an inference. Every input is checked first ([`crate::engine::shape`]): a shape
    /// or data the rule refuses is an `InvalidArg` error and never reaches the model.
    fn infer(&self, request: InferRequest) -> Result<Self::Responses, EngineError>;

    /// Loads a model by name; resolves once it is loaded or the load has failed.
    fn load_model(&self, model: &str) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// Loads a loaded model again with `config` (its configuration in Triton's JSON form) in
    /// place of its own; resolves once the new instances serve, or the reload failed (the old
    /// ones then serve on).
    fn reload_with_config(
        &self,
        model: &str,
        config: String,
    ) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// Starts unloading a model and the models that depend on it.
    fn unload_model(&self, model: &str) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// Adds a repository whose folders are served by the names `mapping` gives them
    /// (`(folder, name)` pairs; a folder not in it goes by its own name).
    fn register_repository(
        &self,
        repository: &Path,
        mapping: &[(String, String)],
    ) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// Removes a repository added with [`Engine::register_repository`].
    fn unregister_repository(
        &self,
        repository: &Path,
    ) -> impl Future<Output = Result<(), EngineError>> + Send;
    /// Ends the backend processes of `model`, whose load is being abandoned (it outlasted its
    /// time-out): a model that hangs in its initialisation would otherwise hold one of the
    /// core's load threads for good. The core's load then fails, and the thread is free. How
    /// many processes were ended; an engine without such processes ends none.
    fn end_abandoned_load(&self, model: &str) -> usize {
        let _ = model;
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_states_are_typed() {
        assert_eq!(ModelState::from_index("READY", ""), ModelState::Ready);
        assert_eq!(ModelState::from_index("LOADING", ""), ModelState::Loading);
        assert_eq!(
            ModelState::from_index("UNLOADING", ""),
            ModelState::Unloading
        );
        assert!(ModelState::from_index("UNAVAILABLE", "unloaded").is_unloaded());
        let failed = ModelState::from_index("UNAVAILABLE", "init failed");
        assert!(!failed.is_unloaded());
        assert_eq!(
            ModelState::from_index("RETIRING", "x"),
            ModelState::Unavailable("RETIRING: x".into())
        );
    }

    #[test]
    fn a_sequence_batcher_is_read_off_the_configuration() {
        use serde_json::json;
        let idle = |config: serde_json::Value| SequenceBatching::of_config(&config);
        assert_eq!(idle(json!({"name": "m"})), None);
        assert_eq!(idle(json!({"sequence_batching": null})), None);
        assert_eq!(
            idle(json!({"sequence_batching": {}})).unwrap().idle_limit,
            DEFAULT_SEQUENCE_IDLE
        );
        assert_eq!(
            idle(json!({"sequence_batching": {"max_sequence_idle_microseconds": "60000000"}}))
                .unwrap()
                .idle_limit,
            Duration::from_secs(60)
        );
        assert_eq!(
            idle(json!({"sequence_batching": {"max_sequence_idle_microseconds": 2500}}))
                .unwrap()
                .idle_limit,
            Duration::from_micros(2500)
        );
    }

    fn slots(config: serde_json::Value) -> Option<usize> {
        SequenceBatching::of_config(&config).unwrap().slots
    }

    #[test]
    fn a_sequence_batchers_slots_are_read_off_the_configuration() {
        let direct = serde_json::json!({"max_batch_size": 32, "sequence_batching": {},
            "instance_group": [{"count": 2}, {"count": "1"}]});
        assert_eq!(slots(direct), Some(96));
        let unbatched =
            serde_json::json!({"max_batch_size": 0, "sequence_batching": {"direct": {}}});
        assert_eq!(slots(unbatched), Some(1));
        let oldest = serde_json::json!({"max_batch_size": 8,
            "sequence_batching": {"oldest": {"max_candidate_sequences": 100}}});
        assert_eq!(slots(oldest), Some(100));
        let unbounded = serde_json::json!({"sequence_batching": {"oldest": {}}});
        assert_eq!(slots(unbounded), None);
    }
}

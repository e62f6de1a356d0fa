//! A stateful model's idle limit against the sessions' expiration.
//!
//! Triton drops a sequence that has been idle for `max_sequence_idle_microseconds`, 1 s when
//! the model's configuration sets none; a session idle longer than that would have lost its
//! state while it is still open. Decision, when sessions are on and a model with a sequence
//! batcher is loaded (at start, and on each multi-model load):
//!
//! - its `config.pbtxt` sets no idle limit: the limit is raised to the session expiration plus
//!   [`MARGIN`], so the session always ends first (and sends the sequence its END). The
//!   configuration the core first loads already carries it (trident writes it:
//!   [`crate::artifacts::canonical`]), so the model loads once; only a model whose sequence
//!   batcher the backend added itself is loaded again here, with the raised limit;
//! - it sets one: the model's word stands, and a session of it expires after the shorter of the
//!   two (its `Expires` says so). The load logs which applies and the field that raises it.
//!
//! An ensemble has no sequence batcher of its own: each of its stateful steps is aligned so.
//!
//! Either way, a request the core refuses because the sequence is gone ends its session with a
//! clear 400 (`SessionTurn::lost`).

use std::path::Path;
use std::time::Duration;

use crate::engine::service::{MAX_ENSEMBLE_DEPTH, stateful_steps};
use crate::engine::{Engine, EngineError, SequenceBatching};

/// How much longer than the session expiration a model's raised idle limit is: the endpoint's
/// expiry (checked each second) ends a session, and sends its END, well before the core would
/// drop the sequence.
pub const MARGIN: Duration = Duration::from_secs(60);

/// The configuration field that bounds a sequence's idle time.
const IDLE_FIELD: &str = "max_sequence_idle_microseconds";

/// Whether the model configuration at `folder` sets the idle limit itself (outside comments).
fn sets_idle_limit(folder: &Path) -> bool {
    std::fs::read_to_string(folder.join("config.pbtxt")).is_ok_and(|text| {
        text.lines()
            .map(|line| line.split('#').next().unwrap_or(""))
            .any(|line| line.contains(IDLE_FIELD))
    })
}

/// Aligns `model` (loaded from `folder`) with sessions that expire after `expiration` idle, as
/// the module says. A model without a sequence batcher is left as it is.
pub async fn align<E: Engine>(
    engine: &E,
    model: &str,
    folder: &Path,
    expiration: Duration,
) -> Result<(), EngineError> {
    let config = engine.model_config(model)?;
    let Some(batching) = SequenceBatching::of_config(&config) else {
        // An ensemble: each stateful step (in the ensemble's repository, beside its folder) is
        // aligned as a model of its own; its sessions take the steps' sequence.
        let repository = folder.parent().unwrap_or(folder);
        for (_, step) in stateful_steps(engine, &config, MAX_ENSEMBLE_DEPTH)? {
            Box::pin(align(engine, &step, &repository.join(&step), expiration)).await?;
        }
        return Ok(());
    };
    let folder_owned = folder.to_path_buf();
    let set = crate::files::off_thread(folder, move || sets_idle_limit(&folder_owned))
        .await
        .unwrap_or(false);
    let limit = batching.idle_limit;
    if set {
        if limit < expiration {
            tracing::warn!(
                model,
                idle_limit_secs = limit.as_secs_f64(),
                expiration_secs = expiration.as_secs(),
                "the model's sequence_batching.{IDLE_FIELD} is below SAGEMAKER_SESSIONS_EXPIRATION: \
                 its sessions expire after the model's limit; raise {IDLE_FIELD} in its \
                 config.pbtxt to keep them longer"
            );
        } else {
            tracing::info!(
                model,
                idle_limit_secs = limit.as_secs_f64(),
                expiration_secs = expiration.as_secs(),
                "sessions of the model expire after SAGEMAKER_SESSIONS_EXPIRATION (its \
                 sequence_batching.{IDLE_FIELD} is longer)"
            );
        }
        return Ok(());
    }
    let raised = expiration + MARGIN;
    if limit >= raised {
        // Already raised (a model loaded again with its own configuration).
        return Ok(());
    }
    let mut config = config;
    config["sequence_batching"][IDLE_FIELD] =
        serde_json::json!(u64::try_from(raised.as_micros()).unwrap_or(u64::MAX));
    engine.reload_with_config(model, config.to_string()).await?;
    tracing::info!(
        model,
        idle_limit_secs = raised.as_secs(),
        expiration_secs = expiration.as_secs(),
        "the model's config.pbtxt sets no sequence_batching.{IDLE_FIELD} (Triton's default is \
         1 s): loaded again with SAGEMAKER_SESSIONS_EXPIRATION plus {} s, so its sessions \
         expire first; set {IDLE_FIELD} to choose another limit",
        MARGIN.as_secs()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::fake::{FakeEngine, FakeModel};

    fn engine(config: serde_json::Value) -> FakeEngine {
        let metadata = json!({"name": "m", "inputs": [], "outputs": []});
        let mut model = FakeModel::new(metadata, |_| Vec::new());
        model.config = Some(config);
        FakeEngine::new().with_model("m", model)
    }

    fn idle_limit(engine: &FakeEngine) -> Duration {
        engine.sequence_batching("m").unwrap().unwrap().idle_limit
    }

    #[tokio::test]
    async fn a_default_idle_limit_is_raised_past_the_expiration() {
        let folder = tempfile::tempdir().unwrap();
        let pbtxt =
            "backend: \"python\"\n# max_sequence_idle_microseconds: 5\nsequence_batching {}\n";
        std::fs::write(folder.path().join("config.pbtxt"), pbtxt).unwrap();
        let engine = engine(json!({"sequence_batching": {IDLE_FIELD: 1_000_000}}));
        let expiration = Duration::from_secs(1200);
        align(&engine, "m", folder.path(), expiration)
            .await
            .unwrap();
        assert_eq!(idle_limit(&engine), expiration + MARGIN);
        // Aligned once: a second load with the raised configuration is left alone.
        align(&engine, "m", folder.path(), expiration)
            .await
            .unwrap();
        let reloads = engine.calls().iter().filter(|c| *c == "reload m").count();
        assert_eq!(reloads, 1);
    }

    #[tokio::test]
    async fn a_limit_the_model_sets_stands() {
        let folder = tempfile::tempdir().unwrap();
        let pbtxt = "sequence_batching { max_sequence_idle_microseconds: 2000000 }\n";
        std::fs::write(folder.path().join("config.pbtxt"), pbtxt).unwrap();
        let engine = engine(json!({"sequence_batching": {IDLE_FIELD: 2_000_000}}));
        align(&engine, "m", folder.path(), Duration::from_secs(1200))
            .await
            .unwrap();
        assert_eq!(idle_limit(&engine), Duration::from_secs(2));
        assert!(engine.calls().is_empty(), "{:?}", engine.calls());
    }

    #[tokio::test]
    async fn a_model_without_a_sequence_batcher_is_left_alone() {
        let folder = tempfile::tempdir().unwrap();
        let engine = engine(json!({"name": "m"}));
        align(&engine, "m", folder.path(), Duration::from_secs(5))
            .await
            .unwrap();
        assert!(engine.calls().is_empty());
    }
}

//! The one home of a session's life: opened on a model, closed by its client, expired when idle,
//! ended with its model (unload, a new load of its name) and with the server. [`Sessions`] owns
//! the table and the engine, and each end runs to completion in a task of its own, so no client
//! that leaves can cut short a close, and the unload and shutdown paths drive the rest
//! themselves (`http` only frames answers).

use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

use super::table::{Ended, Session, SessionCounts, SessionSettings, SessionTable, SessionTurn};
use super::{SessionError, end_sequence, idle};
use crate::engine::Engine;

/// How long ending a model's sessions (before its unload) or every session (at shutdown) may
/// take: each waits for its running request and sends its END, all at once; what is not done
/// by then is abandoned (the core's own time-outs end it).
pub const END_WITHIN: Duration = Duration::from_secs(5);

/// The endpoint's stateful sessions over `engine`.
pub struct Sessions<E> {
    table: Arc<SessionTable>,
    engine: E,
}

impl<E: Engine> Sessions<E> {
    /// No sessions yet, kept within `settings`, on `engine`.
    pub fn new(settings: SessionSettings, engine: E) -> Sessions<E> {
        Sessions {
            table: Arc::new(SessionTable::new(settings)),
            engine,
        }
    }

    /// The bounds sessions are kept within.
    pub fn settings(&self) -> SessionSettings {
        self.table.settings()
    }

    /// Sessions open now, and the counts since the start.
    pub fn counts(&self) -> SessionCounts {
        self.table.counts()
    }

    /// Opens a session on `model`; returns it and when it expires if left idle.
    pub fn open(&self, model: &str) -> Result<(Arc<Session>, SystemTime), SessionError> {
        let batching = self
            .engine
            .sequence_batching(model)
            .map_err(SessionError::Model)?;
        let opened = self.table.create(model, batching)?;
        if let Some(reclaimed) = opened.reclaimed {
            tracing::info!(
                model = reclaimed.session.model,
                "an idle session ended to give its slot to a new one"
            );
            let engine = self.engine.clone();
            tokio::spawn(async move { finish(&engine, reclaimed).await });
        }
        tracing::info!(
            model,
            stateful = batching.is_some(),
            expiration_secs = opened.session.expiration.as_secs_f64(),
            "session opened"
        );
        Ok((opened.session, opened.expires))
    }

    /// Waits for the turn of a request in session `id` on `model`.
    pub async fn turn(&self, id: &str, model: &str) -> Result<SessionTurn, SessionError> {
        self.table.turn(id, model).await
    }

    /// Closes session `id` on `model`: once the request running in it has finished, its
    /// sequence gets its END. Resolves when that is done; the close finishes even if the caller
    /// goes away meanwhile.
    pub async fn close(&self, id: &str, model: &str) -> Result<(), SessionError> {
        let session = self.table.take(id, model)?;
        let engine = self.engine.clone();
        tokio::spawn(async move { finish(&engine, Ended::after_turn(session).await).await })
            .await
            .map_err(|e| SessionError::Internal(format!("the session's close failed: {e}")))?;
        tracing::info!(model, "session closed");
        Ok(())
    }

    /// Ends every session of `model`: before it is unloaded (the ENDs reach it while it still
    /// serves), or when a new load takes its name (a name loaded again never sees an earlier
    /// load's sessions or their stores). Returns how many there were.
    pub async fn end_model(&self, model: &str) -> usize {
        let ended = self.end_all(self.table.take_model(model)).await;
        if ended > 0 {
            tracing::info!(model, sessions = ended, "the model's sessions ended");
        }
        ended
    }

    /// Ends every session as the server stops, so the core has no open sequence to wait for.
    pub async fn shutdown(&self) -> usize {
        let ended = self.end_all(self.table.take_all()).await;
        if ended > 0 {
            tracing::info!(sessions = ended, "open sessions ended for the shutdown");
        }
        ended
    }

    /// Waits for the turn of each of `sessions` (taken out of the table) and sends the ENDs, all
    /// at once, within [`END_WITHIN`].
    async fn end_all(&self, sessions: Vec<Arc<Session>>) -> usize {
        let count = sessions.len();
        let mut ends = tokio::task::JoinSet::new();
        for session in sessions {
            let engine = self.engine.clone();
            ends.spawn(async move { finish(&engine, Ended::after_turn(session).await).await });
        }
        let all = async { while ends.join_next().await.is_some() {} };
        if tokio::time::timeout(END_WITHIN, all).await.is_err() {
            tracing::warn!(
                left = ends.len(),
                "sessions still running a request after {} s; their ends are abandoned",
                END_WITHIN.as_secs()
            );
            ends.detach_all();
        }
        count
    }

    /// A model was loaded as `model` from `folder`, before it serves: sessions of an earlier
    /// load of the name end, and its sequence idle limit is aligned with the expiration
    /// ([`idle`]). A failure to align is logged; the model serves with its own limit.
    pub async fn model_loaded(&self, model: &str, folder: &Path) {
        self.end_model(model).await;
        let expiration = self.settings().expiration;
        if let Err(error) = idle::align(&self.engine, model, folder, expiration).await {
            tracing::error!(
                model,
                error = %error.message,
                "the model's sequence idle limit could not be raised; its sessions end when \
                 the model drops their sequence"
            );
        }
    }

    /// Expires idle sessions until `sessions` is dropped, with or without traffic: every second,
    /// or twice per shortest expiration when that is shorter. A stateful model is sent the end
    /// of each expired session's sequence.
    pub async fn expire_idle(sessions: Weak<Sessions<E>>) {
        loop {
            let Some(period) = sessions.upgrade().map(|s| {
                (s.table.shortest_expiration() / 2)
                    .clamp(Duration::from_millis(50), Duration::from_secs(1))
            }) else {
                return;
            };
            tokio::time::sleep(period).await;
            let Some(sessions) = sessions.upgrade() else {
                return;
            };
            for ended in sessions.table.expire_idle(Instant::now()) {
                tracing::info!(model = %ended.session.model, "session expired");
                let engine = sessions.engine.clone();
                tokio::spawn(async move { finish(&engine, ended).await });
            }
        }
    }
}

/// Sends an ended session's sequence its END when the model saw it start.
async fn finish<E: Engine>(engine: &E, ended: Ended) {
    if ended.needs_end() {
        end_sequence(engine, &ended.session).await;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::fake::{FakeEngine, FakeModel};
    use crate::engine::{InferRequest, SequenceId};

    /// The correlation id and END flag of each request a fake model got.
    type Seen = Arc<std::sync::Mutex<Vec<(u64, bool)>>>;

    /// A stateful fake model that records the sequence flags of every request it gets.
    fn recording() -> (FakeEngine, Seen) {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let metadata = json!({"name": "m", "inputs": [
            {"name": "X", "datatype": "INT32", "shape": [1]}], "outputs": []});
        let log = Arc::clone(&seen);
        let mut model = FakeModel::new(metadata, move |request: &InferRequest| {
            if let Some(SequenceId::Number(id)) = request.sequence.id {
                log.lock().unwrap().push((id, request.sequence.end));
            }
            Vec::new()
        });
        model.stateful = true;
        (FakeEngine::new().with_model("m", model), seen)
    }

    fn settings() -> SessionSettings {
        SessionSettings {
            expiration: Duration::from_secs(60),
            max_sessions: 200,
            store_bytes: 64,
            reclaim_idle: Duration::from_secs(3600),
        }
    }

    #[tokio::test]
    async fn a_close_ends_the_started_sequence_even_when_its_caller_leaves() {
        let (engine, seen) = recording();
        let sessions = Arc::new(Sessions::new(settings(), engine));
        let (session, _) = sessions.open("m").unwrap();
        let turn = sessions.turn(&session.id, "m").await.unwrap();
        turn.submitted();
        // The caller of the close gives up at once; the close still ends the sequence once the
        // running request's turn is over.
        let closing = {
            let (sessions, id) = (Arc::clone(&sessions), session.id.clone());
            tokio::spawn(async move { sessions.close(&id, "m").await })
        };
        tokio::task::yield_now().await;
        closing.abort();
        drop(turn);
        for _ in 0..100 {
            if !seen.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(seen.lock().unwrap().as_slice(), [(1 << 63, true)]);
        assert_eq!(sessions.counts().open, 0);
    }

    #[tokio::test]
    async fn shutdown_ends_every_started_sequence() {
        let (engine, seen) = recording();
        let sessions = Sessions::new(settings(), engine);
        for index in 0..100 {
            let (session, _) = sessions.open("m").unwrap();
            if index % 2 == 0 {
                sessions.turn(&session.id, "m").await.unwrap().submitted();
            }
        }
        assert_eq!(sessions.shutdown().await, 100);
        let ends = seen.lock().unwrap().len();
        assert_eq!(ends, 50, "one END per started session");
        assert_eq!(sessions.counts().open, 0);
    }

    #[tokio::test]
    async fn a_new_load_of_a_name_ends_the_sessions_of_the_last() {
        let (engine, _) = recording();
        let sessions = Sessions::new(settings(), engine);
        let (old, _) = sessions.open("m").unwrap();
        let folder = tempfile::tempdir().unwrap();
        sessions.model_loaded("m", folder.path()).await;
        assert_eq!(
            sessions.turn(&old.id, "m").await.err(),
            Some(SessionError::Unknown(old.id.clone()))
        );
    }
}

//! The open sessions: created with a random id and a correlation id of their own, looked up by
//! id and model, closed, expired when idle, ended with their model.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::OwnedMutexGuard;

use super::SessionStore;
use crate::engine::{Sequence, SequenceId};

/// Default for `SAGEMAKER_SESSIONS_EXPIRATION`: idle seconds before a session expires.
pub const DEFAULT_EXPIRATION_SECS: u64 = 1200;
/// The longest `SAGEMAKER_SESSIONS_EXPIRATION` taken: 30 days.
pub const MAX_EXPIRATION_SECS: u64 = 30 * 24 * 3600;
/// Default for `TRIDENT_MAX_SESSIONS`.
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;

/// Session correlation ids are numbers from here on, given out in order. With sessions on, a
/// request outside a session may not use them (`pipeline`), so no client reaches a session's
/// state in the model through Triton's own `sequence_id` parameter.
pub const FIRST_SESSION_SEQUENCE_ID: u64 = 1 << 63;

/// The bounds sessions are kept within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionSettings {
    /// How long a session may stay idle before it expires.
    pub expiration: Duration,
    /// Sessions open at once; one more is refused (429).
    pub max_sessions: usize,
    /// Bytes of keys and values one session's plugin store may hold.
    pub store_bytes: usize,
}

impl Default for SessionSettings {
    fn default() -> SessionSettings {
        SessionSettings {
            expiration: Duration::from_secs(DEFAULT_EXPIRATION_SECS),
            max_sessions: DEFAULT_MAX_SESSIONS,
            store_bytes: super::store::DEFAULT_STORE_BYTES,
        }
    }
}

/// Why a session request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionError {
    /// The header or body does not fit the convention (400).
    Invalid(String),
    /// No open session has the id: never opened, closed, expired, or opened before a restart
    /// (400).
    Unknown(String),
    /// The session was opened on another model (400).
    WrongModel(String),
    /// As many sessions are open as the endpoint allows (429).
    Full(usize),
    /// The session could not be opened (500).
    Internal(String),
}

impl SessionError {
    /// The message a client reads.
    pub fn message(&self) -> String {
        match self {
            SessionError::Invalid(message) | SessionError::Internal(message) => message.clone(),
            SessionError::Unknown(id) => format!(
                "session '{id}' is not open: it was closed, it expired, or the endpoint \
                 restarted; open a new one with X-Amzn-SageMaker-Session-Id: NEW_SESSION"
            ),
            SessionError::WrongModel(id) => {
                format!("session '{id}' was opened on another model")
            }
            SessionError::Full(limit) => format!(
                "the endpoint holds its limit of {limit} open sessions; close one, or retry \
                 when one expires"
            ),
        }
    }
}

/// One open session.
#[derive(Debug)]
pub struct Session {
    /// The id clients send in `X-Amzn-SageMaker-Session-Id`.
    pub id: String,
    /// The engine's name for the model the session belongs to.
    pub model: String,
    /// Whether the model has sequence batching: the session is then a sequence of the model.
    pub stateful: bool,
    correlation: u64,
    /// Set once a request of the session reached the model (the next ones carry no start flag).
    started: AtomicBool,
    /// Set when the session closes, expires or its model goes: requests waiting for their turn
    /// are refused.
    ended: AtomicBool,
    last_used: Mutex<Instant>,
    turn: Arc<tokio::sync::Mutex<()>>,
    store: Arc<SessionStore>,
}

impl Session {
    fn touch(&self) {
        *lock(&self.last_used) = Instant::now();
    }

    fn idle_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(*lock(&self.last_used))
    }

    /// The session's sequence id in the engine.
    pub fn sequence_id(&self) -> SequenceId {
        SequenceId::Number(self.correlation)
    }

    /// The store the session's plugins share.
    pub fn store(&self) -> &Arc<SessionStore> {
        &self.store
    }

    /// Whether a request of the session reached the model.
    pub fn started(&self) -> bool {
        self.started.load(Ordering::Relaxed)
    }
}

/// A request's turn in its session: held from before its inference is submitted until its
/// answer is ready, so the session's requests reach the model one at a time, in order.
pub struct SessionTurn {
    session: Arc<Session>,
    _turn: OwnedMutexGuard<()>,
}

/// A session is idle from the end of its last request, not its start.
impl Drop for SessionTurn {
    fn drop(&mut self) {
        self.session.touch();
    }
}

impl SessionTurn {
    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Where the request stands in the model's sequence: `None` when the model has no sequence
    /// batching.
    pub fn sequence(&self) -> Option<Sequence> {
        self.session.stateful.then(|| Sequence {
            id: Some(self.session.sequence_id()),
            start: !self.session.started(),
            end: false,
        })
    }

    /// The request was taken by the engine: the session's next ones carry no start flag.
    pub fn submitted(&self) {
        self.session.started.store(true, Ordering::Relaxed);
    }
}

/// A session taken out of the table (closed or expired), with its turn: no request of it runs
/// any more, and the end of its sequence may be sent.
pub struct Ended {
    /// The session.
    pub session: Arc<Session>,
    _turn: OwnedMutexGuard<()>,
}

impl Ended {
    /// Whether the model must be told that the sequence ended: it has sequence batching and saw
    /// a request of the session.
    pub fn needs_end(&self) -> bool {
        self.session.stateful && self.session.started()
    }
}

/// Counts since the server started, and the sessions open now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCounts {
    /// Sessions open now.
    pub open: u64,
    /// Sessions opened.
    pub created: u64,
    /// Sessions closed by their client, or ended with their model's unload.
    pub closed: u64,
    /// Sessions that expired.
    pub expired: u64,
    /// Bytes the open sessions' plugin stores hold.
    pub store_bytes: u64,
}

/// The open sessions of the endpoint.
pub struct Sessions {
    settings: SessionSettings,
    open: Mutex<HashMap<String, Arc<Session>>>,
    next_correlation: AtomicU64,
    created: AtomicU64,
    closed: AtomicU64,
    expired: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Sessions {
    /// An empty table kept within `settings`.
    pub fn new(settings: SessionSettings) -> Sessions {
        Sessions {
            settings,
            open: Mutex::new(HashMap::new()),
            next_correlation: AtomicU64::new(FIRST_SESSION_SEQUENCE_ID),
            created: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            expired: AtomicU64::new(0),
        }
    }

    /// The bounds the table keeps.
    pub fn settings(&self) -> SessionSettings {
        self.settings
    }

    /// Opens a session on `model`; returns it and when it expires if left idle.
    pub fn create(
        &self,
        model: &str,
        stateful: bool,
    ) -> Result<(Arc<Session>, SystemTime), SessionError> {
        let id = random_id()?;
        let session = {
            let mut open = lock(&self.open);
            if open.len() >= self.settings.max_sessions {
                return Err(SessionError::Full(self.settings.max_sessions));
            }
            let session = Arc::new(Session {
                id: id.clone(),
                model: model.to_owned(),
                stateful,
                correlation: self.next_correlation.fetch_add(1, Ordering::Relaxed),
                started: AtomicBool::new(false),
                ended: AtomicBool::new(false),
                last_used: Mutex::new(Instant::now()),
                turn: Arc::new(tokio::sync::Mutex::new(())),
                store: Arc::new(SessionStore::new(id.clone(), self.settings.store_bytes)),
            });
            open.insert(id, Arc::clone(&session));
            session
        };
        self.created.fetch_add(1, Ordering::Relaxed);
        Ok((session, SystemTime::now() + self.settings.expiration))
    }

    fn find(&self, id: &str, model: &str) -> Result<Arc<Session>, SessionError> {
        let open = lock(&self.open);
        let session = open
            .get(id)
            .ok_or_else(|| SessionError::Unknown(id.to_owned()))?;
        if session.model != model {
            return Err(SessionError::WrongModel(id.to_owned()));
        }
        session.touch();
        Ok(Arc::clone(session))
    }

    /// Waits for the turn of a request in session `id` on `model`.
    pub async fn turn(&self, id: &str, model: &str) -> Result<SessionTurn, SessionError> {
        let session = self.find(id, model)?;
        let turn = Arc::clone(&session.turn).lock_owned().await;
        if session.ended.load(Ordering::Relaxed) {
            return Err(SessionError::Unknown(id.to_owned()));
        }
        session.touch();
        Ok(SessionTurn {
            session,
            _turn: turn,
        })
    }

    /// Closes session `id` on `model`, once the requests before the close have had their turn.
    pub async fn close(&self, id: &str, model: &str) -> Result<Ended, SessionError> {
        let session = self.find(id, model)?;
        if lock(&self.open).remove(id).is_none() {
            // Closed or expired meanwhile.
            return Err(SessionError::Unknown(id.to_owned()));
        }
        session.ended.store(true, Ordering::Relaxed);
        self.closed.fetch_add(1, Ordering::Relaxed);
        let turn = Arc::clone(&session.turn).lock_owned().await;
        Ok(Ended {
            session,
            _turn: turn,
        })
    }

    /// Takes out every session idle for longer than the expiration at `now`. A session whose
    /// request is running is not idle.
    pub fn expire_idle(&self, now: Instant) -> Vec<Ended> {
        let mut open = lock(&self.open);
        let idle: Vec<(String, OwnedMutexGuard<()>)> = open
            .iter()
            .filter(|(_, s)| s.idle_for(now) > self.settings.expiration)
            .filter_map(|(id, s)| Some((id.clone(), Arc::clone(&s.turn).try_lock_owned().ok()?)))
            .collect();
        let ended: Vec<Ended> = idle
            .into_iter()
            .filter_map(|(id, turn)| {
                let session = open.remove(&id)?;
                session.ended.store(true, Ordering::Relaxed);
                Some(Ended {
                    session,
                    _turn: turn,
                })
            })
            .collect();
        self.expired
            .fetch_add(ended.len() as u64, Ordering::Relaxed);
        ended
    }

    /// Ends every session of `model` (it was unloaded); returns how many there were.
    pub fn end_model(&self, model: &str) -> usize {
        let mut open = lock(&self.open);
        let before = open.len();
        open.retain(|_, session| {
            let keep = session.model != model;
            if !keep {
                session.ended.store(true, Ordering::Relaxed);
            }
            keep
        });
        let ended = before - open.len();
        self.closed.fetch_add(ended as u64, Ordering::Relaxed);
        ended
    }

    /// Sessions open now, and the counts since the start.
    pub fn counts(&self) -> SessionCounts {
        let (open, store_bytes) = {
            let open = lock(&self.open);
            let bytes: usize = open.values().map(|s| s.store.bytes()).sum();
            (open.len() as u64, bytes as u64)
        };
        SessionCounts {
            open,
            store_bytes,
            created: self.created.load(Ordering::Relaxed),
            closed: self.closed.load(Ordering::Relaxed),
            expired: self.expired.load(Ordering::Relaxed),
        }
    }
}

/// 128 random bits from the kernel, as 32 hex digits: a client cannot guess another's session.
fn random_id() -> Result<String, SessionError> {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        filled +=
            rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty())
                .map_err(|e| SessionError::Internal(format!("no random session id: {e}")))?;
    }
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(expiration: Duration, max_sessions: usize) -> Sessions {
        Sessions::new(SessionSettings {
            expiration,
            max_sessions,
            store_bytes: 100,
        })
    }

    #[tokio::test]
    async fn sessions_are_sequences_of_their_model() {
        let sessions = table(Duration::from_secs(60), 4);
        let (a, _) = sessions.create("m", true).unwrap();
        let (b, _) = sessions.create("m", false).unwrap();
        assert_ne!(a.id, b.id);
        assert_eq!(a.id.len(), 32);
        assert_ne!(a.sequence_id(), b.sequence_id());
        let turn = sessions.turn(&a.id, "m").await.unwrap();
        assert!(turn.sequence().unwrap().start);
        turn.submitted();
        drop(turn);
        let turn = sessions.turn(&a.id, "m").await.unwrap();
        let sequence = turn.sequence().unwrap();
        assert!(!sequence.start && !sequence.end);
        drop(turn);
        assert!(
            sessions
                .turn(&b.id, "m")
                .await
                .unwrap()
                .sequence()
                .is_none()
        );
        assert_eq!(
            sessions.turn(&a.id, "other").await.err(),
            Some(SessionError::WrongModel(a.id.clone()))
        );
        assert!(sessions.close(&a.id, "m").await.unwrap().needs_end());
        assert!(!sessions.close(&b.id, "m").await.unwrap().needs_end());
        assert_eq!(
            sessions.turn(&a.id, "m").await.err(),
            Some(SessionError::Unknown(a.id.clone()))
        );
        assert!(sessions.close(&a.id, "m").await.is_err());
        let counts = sessions.counts();
        assert_eq!((counts.open, counts.created, counts.closed), (0, 2, 2));
    }

    #[tokio::test]
    async fn the_bound_holds_and_idle_sessions_expire() {
        let sessions = table(Duration::from_millis(10), 2);
        let (a, _) = sessions.create("m", true).unwrap();
        let (b, _) = sessions.create("m", true).unwrap();
        assert_eq!(
            sessions.create("m", true).err(),
            Some(SessionError::Full(2))
        );
        // A session whose request is running does not expire.
        let busy = sessions.turn(&b.id, "m").await.unwrap();
        let later = Instant::now() + Duration::from_secs(1);
        let ended = sessions.expire_idle(later);
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].session.id, a.id);
        drop(busy);
        assert_eq!(sessions.end_model("m"), 1);
        assert!(sessions.turn(&b.id, "m").await.is_err());
        let counts = sessions.counts();
        assert_eq!((counts.open, counts.expired, counts.closed), (0, 1, 1));
        sessions.create("m", true).unwrap();
    }

    #[tokio::test]
    async fn a_close_waits_for_the_running_request_and_refuses_the_queued_ones() {
        let sessions = Arc::new(table(Duration::from_secs(60), 4));
        let (a, _) = sessions.create("m", true).unwrap();
        let running = sessions.turn(&a.id, "m").await.unwrap();
        let queued = tokio::spawn({
            let (sessions, id) = (Arc::clone(&sessions), a.id.clone());
            async move { sessions.turn(&id, "m").await.err() }
        });
        let close = tokio::spawn({
            let (sessions, id) = (Arc::clone(&sessions), a.id.clone());
            async move { sessions.close(&id, "m").await.is_ok() }
        });
        tokio::task::yield_now().await;
        drop(running);
        assert!(close.await.unwrap());
        assert_eq!(
            queued.await.unwrap(),
            Some(SessionError::Unknown(a.id.clone()))
        );
    }
}

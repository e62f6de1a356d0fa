//! The open sessions, with no engine in sight: created with a random id and a correlation id of
//! their own, looked up by id and model, taken out when they close, expire, lose their state or
//! their model goes. What taking a session out means for its model (the END request) is
//! `lifecycle.rs`'s.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::OwnedMutexGuard;

use super::{SessionError, SessionStore};
use crate::engine::{Sequence, SequenceBatching, SequenceId};

/// Default for `SAGEMAKER_SESSIONS_EXPIRATION`: idle seconds before a session expires.
pub const DEFAULT_EXPIRATION_SECS: u64 = 1200;
/// The longest `SAGEMAKER_SESSIONS_EXPIRATION` taken: 30 days.
pub const MAX_EXPIRATION_SECS: u64 = 30 * 24 * 3600;
/// Default for `TRIDENT_MAX_SESSIONS`.
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;
/// Default for `TRIDENT_SESSION_RECLAIM_IDLE_SECS`: how long a session must have been idle
/// before its slot may be given to a new session when none is free (5 minutes).
pub const DEFAULT_RECLAIM_IDLE_SECS: u64 = 300;

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
    /// Bytes one session's plugin store may hold (keys, values and a charge per entry).
    pub store_bytes: usize,
    /// How long a session must have been idle before its slot may go to a new session when
    /// none is free: the least recently used such session is ended for it.
    pub reclaim_idle: Duration,
}

impl Default for SessionSettings {
    fn default() -> SessionSettings {
        SessionSettings {
            expiration: Duration::from_secs(DEFAULT_EXPIRATION_SECS),
            max_sessions: DEFAULT_MAX_SESSIONS,
            store_bytes: super::store::DEFAULT_STORE_BYTES,
            reclaim_idle: Duration::from_secs(DEFAULT_RECLAIM_IDLE_SECS),
        }
    }
}

/// When the first of `sessions` frees its slot if left idle from `now`, expiring or becoming
/// reclaimable after `reclaim_idle` (at least a second: a client told to retry sooner would
/// find it still there).
fn first_free<'a>(
    sessions: impl Iterator<Item = &'a Arc<Session>>,
    now: Instant,
    reclaim_idle: Duration,
) -> Duration {
    sessions
        .map(|session| {
            session
                .expiration
                .min(reclaim_idle)
                .saturating_sub(session.idle_for(now))
        })
        .min()
        .unwrap_or_default()
        .max(Duration::from_secs(1))
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
    /// How long it may stay idle: the endpoint's expiration, or the model's sequence idle limit
    /// when that is shorter (the model would drop the sequence first).
    pub expiration: Duration,
    correlation: u64,
    /// Set once a request of the session reached the model (the next ones carry no start flag).
    started: AtomicBool,
    /// Set when the session leaves the table: requests waiting for their turn are refused.
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
/// answer is complete (a stream's last event), so the session's requests reach the model one
/// at a time, in order. Clones share the turn; it passes on when the last one is dropped.
#[derive(Clone)]
pub struct SessionTurn(Arc<Turn>);

struct Turn {
    session: Arc<Session>,
    table: Weak<SessionTable>,
    _guard: OwnedMutexGuard<()>,
}

/// A session is idle from the end of its last request, not its start.
impl Drop for Turn {
    fn drop(&mut self) {
        self.session.touch();
    }
}

impl SessionTurn {
    /// The session.
    pub fn session(&self) -> &Session {
        &self.0.session
    }

    /// Where the request stands in the model's sequence: `None` when the model has no sequence
    /// batching.
    pub fn sequence(&self) -> Option<Sequence> {
        let session = &self.0.session;
        session.stateful.then(|| Sequence {
            id: Some(session.sequence_id()),
            start: !session.started(),
            end: false,
        })
    }

    /// The request was taken by the engine: the session's next ones carry no start flag.
    pub fn submitted(&self) {
        self.0.session.started.store(true, Ordering::Relaxed);
    }

    /// The model refused the request because it no longer holds the session's sequence: the
    /// session ends here (it leaves the table; nothing is sent to the model). Returns what the
    /// client is told.
    pub fn lost(&self) -> SessionError {
        let session = &self.0.session;
        if let Some(table) = self.0.table.upgrade() {
            table.remove_lost(session);
        }
        SessionError::Lost(session.id.clone())
    }
}

/// A session out of the table, with its turn: no request of it runs any more, and the end of
/// its sequence may be sent.
#[derive(Debug)]
pub struct Ended {
    /// The session.
    pub session: Arc<Session>,
    _turn: OwnedMutexGuard<()>,
}

impl Ended {
    /// Waits for the turn of `session` (taken out of the table): the request running in it
    /// finishes first, and the ones queued behind find it ended.
    pub async fn after_turn(session: Arc<Session>) -> Ended {
        let turn = Arc::clone(&session.turn).lock_owned().await;
        Ended {
            session,
            _turn: turn,
        }
    }

    /// Whether the model must be told that the sequence ended: it has sequence batching and saw
    /// a request of the session.
    pub fn needs_end(&self) -> bool {
        self.session.stateful && self.session.started()
    }
}

/// A session just opened.
#[derive(Debug)]
pub struct Opened {
    /// The session.
    pub session: Arc<Session>,
    /// When it expires if left idle.
    pub expires: SystemTime,
    /// The idle session whose slot it took, out of the table, for its END.
    pub reclaimed: Option<Ended>,
}

/// Counts since the server started, and the sessions open now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCounts {
    /// Sessions open now.
    pub open: u64,
    /// Sessions opened.
    pub created: u64,
    /// Sessions closed by their client, or ended with their model's unload or the server.
    pub closed: u64,
    /// Sessions that expired.
    pub expired: u64,
    /// Sessions that ended because their model no longer held their state.
    pub lost: u64,
    /// Idle sessions ended to give their slot to a new session.
    pub reclaimed: u64,
    /// Bytes the open sessions' plugin stores hold.
    pub store_bytes: u64,
}

/// The open sessions of the endpoint.
pub struct SessionTable {
    settings: SessionSettings,
    open: Mutex<HashMap<String, Arc<Session>>>,
    next_correlation: AtomicU64,
    /// The shortest expiration of a session opened so far, in milliseconds: how often idle
    /// sessions are looked for.
    shortest_expiration_ms: AtomicU64,
    created: AtomicU64,
    closed: AtomicU64,
    expired: AtomicU64,
    lost: AtomicU64,
    reclaimed: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl SessionTable {
    /// An empty table kept within `settings`.
    pub fn new(settings: SessionSettings) -> SessionTable {
        SessionTable {
            settings,
            open: Mutex::new(HashMap::new()),
            next_correlation: AtomicU64::new(FIRST_SESSION_SEQUENCE_ID),
            shortest_expiration_ms: AtomicU64::new(millis(settings.expiration)),
            created: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            reclaimed: AtomicU64::new(0),
        }
    }

    /// The bounds the table keeps.
    pub fn settings(&self) -> SessionSettings {
        self.settings
    }

    /// The shortest expiration of any session opened so far.
    pub fn shortest_expiration(&self) -> Duration {
        Duration::from_millis(self.shortest_expiration_ms.load(Ordering::Relaxed))
    }

    /// Opens a session on `model`, a sequence of it when it has a sequence batcher; returns it,
    /// when it expires if left idle (the endpoint's expiration, or the model's idle limit when
    /// that is shorter), and the session whose slot it took, if any, for its END.
    ///
    /// When no slot is free (the endpoint's `max_sessions`, or the model's sequence slots),
    /// the least recently used of the sessions in the way that has been idle for
    /// `reclaim_idle` is ended and its slot given to the new one: no client holds slots by
    /// opening sessions and leaving them. With none idle that long, the 429 says when the
    /// first will be.
    pub fn create(
        &self,
        model: &str,
        batching: Option<SequenceBatching>,
    ) -> Result<Opened, SessionError> {
        let id = random_id()?;
        let expiration = batching.map_or(self.settings.expiration, |b| {
            self.settings.expiration.min(b.idle_limit)
        });
        let (session, reclaimed) = {
            let mut open = lock(&self.open);
            let now = Instant::now();
            let reclaim_idle = self.settings.reclaim_idle;
            let mut reclaimed = None;
            if open.len() >= self.settings.max_sessions {
                reclaimed = self.reclaim(&mut open, now, |_| true);
                if reclaimed.is_none() {
                    return Err(SessionError::Full {
                        limit: self.settings.max_sessions,
                        retry_after: first_free(open.values(), now, reclaim_idle),
                    });
                }
            }
            if let Some(slots) = batching.and_then(|b| b.slots) {
                let in_the_way = |s: &Session| s.stateful && s.model == model;
                if open.values().filter(|s| in_the_way(s)).count() >= slots {
                    match self.reclaim(&mut open, now, in_the_way) {
                        Some(ended) => reclaimed = reclaimed.or(Some(ended)),
                        None => {
                            return Err(SessionError::NoSequenceSlot {
                                model: model.to_owned(),
                                slots,
                                retry_after: first_free(
                                    open.values().filter(|s| in_the_way(s)),
                                    now,
                                    reclaim_idle,
                                ),
                            });
                        }
                    }
                }
            }
            let session = Arc::new(Session {
                id: id.clone(),
                model: model.to_owned(),
                stateful: batching.is_some(),
                expiration,
                correlation: self.next_correlation.fetch_add(1, Ordering::Relaxed),
                started: AtomicBool::new(false),
                ended: AtomicBool::new(false),
                last_used: Mutex::new(Instant::now()),
                turn: Arc::new(tokio::sync::Mutex::new(())),
                store: Arc::new(SessionStore::new(id.clone(), self.settings.store_bytes)),
            });
            open.insert(id, Arc::clone(&session));
            (session, reclaimed)
        };
        self.shortest_expiration_ms
            .fetch_min(millis(expiration), Ordering::Relaxed);
        self.created.fetch_add(1, Ordering::Relaxed);
        let now = SystemTime::now();
        Ok(Opened {
            expires: now.checked_add(expiration).unwrap_or(now),
            session,
            reclaimed,
        })
    }

    /// Takes out of `open` the least recently used session that `in_the_way` picks, has been
    /// idle for the reclaim time and runs no request now; `None` when there is none.
    fn reclaim(
        &self,
        open: &mut HashMap<String, Arc<Session>>,
        now: Instant,
        in_the_way: impl Fn(&Session) -> bool,
    ) -> Option<Ended> {
        let mut idle: Vec<&Arc<Session>> = open
            .values()
            .filter(|s| in_the_way(s) && s.idle_for(now) >= self.settings.reclaim_idle)
            .collect();
        idle.sort_by_key(|s| std::cmp::Reverse(s.idle_for(now)));
        let (id, turn) = idle
            .into_iter()
            .find_map(|s| Some((s.id.clone(), Arc::clone(&s.turn).try_lock_owned().ok()?)))?;
        let session = open.remove(&id)?;
        session.ended.store(true, Ordering::Relaxed);
        self.reclaimed.fetch_add(1, Ordering::Relaxed);
        Some(Ended {
            session,
            _turn: turn,
        })
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
    pub async fn turn(
        self: &Arc<Self>,
        id: &str,
        model: &str,
    ) -> Result<SessionTurn, SessionError> {
        let session = self.find(id, model)?;
        let guard = Arc::clone(&session.turn).lock_owned().await;
        if session.ended.load(Ordering::Relaxed) {
            return Err(SessionError::Unknown(id.to_owned()));
        }
        session.touch();
        Ok(SessionTurn(Arc::new(Turn {
            session,
            table: Arc::downgrade(self),
            _guard: guard,
        })))
    }

    /// Takes session `id` on `model` out of the table for its close: requests waiting for its
    /// turn are refused from now on.
    pub fn take(&self, id: &str, model: &str) -> Result<Arc<Session>, SessionError> {
        self.find(id, model)?;
        let session = lock(&self.open)
            .remove(id)
            // Closed or expired meanwhile.
            .ok_or_else(|| SessionError::Unknown(id.to_owned()))?;
        session.ended.store(true, Ordering::Relaxed);
        self.closed.fetch_add(1, Ordering::Relaxed);
        Ok(session)
    }

    /// Takes every session of `model` out of the table (its unload, or a new load of its name).
    pub fn take_model(&self, model: &str) -> Vec<Arc<Session>> {
        self.take_where(|session| session.model == model)
    }

    /// Takes every session out of the table (the server stops).
    pub fn take_all(&self) -> Vec<Arc<Session>> {
        self.take_where(|_| true)
    }

    fn take_where(&self, leaves: impl Fn(&Session) -> bool) -> Vec<Arc<Session>> {
        let mut taken = Vec::new();
        lock(&self.open).retain(|_, session| {
            if !leaves(session) {
                return true;
            }
            session.ended.store(true, Ordering::Relaxed);
            taken.push(Arc::clone(session));
            false
        });
        self.closed.fetch_add(taken.len() as u64, Ordering::Relaxed);
        taken
    }

    /// Takes out every session idle for longer than its expiration at `now`. A session whose
    /// request is running (a stream to its last event) is not idle.
    pub fn expire_idle(&self, now: Instant) -> Vec<Ended> {
        let mut open = lock(&self.open);
        let idle: Vec<(String, OwnedMutexGuard<()>)> = open
            .iter()
            .filter(|(_, s)| s.idle_for(now) > s.expiration)
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

    /// Takes `session` out of the table because its model no longer holds its state.
    fn remove_lost(&self, session: &Arc<Session>) {
        session.ended.store(true, Ordering::Relaxed);
        let mut open = lock(&self.open);
        if open
            .get(&session.id)
            .is_some_and(|current| Arc::ptr_eq(current, session))
        {
            open.remove(&session.id);
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
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
            reclaimed: self.reclaimed.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
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

    const STATEFUL: Option<SequenceBatching> = Some(SequenceBatching {
        idle_limit: Duration::from_secs(3600),
        slots: None,
    });

    fn table(expiration: Duration, max_sessions: usize) -> Arc<SessionTable> {
        Arc::new(SessionTable::new(SessionSettings {
            expiration,
            max_sessions,
            store_bytes: 100,
            reclaim_idle: Duration::from_secs(3600),
        }))
    }

    #[tokio::test]
    async fn sessions_are_sequences_of_their_model() {
        let sessions = table(Duration::from_secs(60), 4);
        let a = sessions.create("m", STATEFUL).unwrap().session;
        let b = sessions.create("m", None).unwrap().session;
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
        let closed = Ended::after_turn(sessions.take(&a.id, "m").unwrap()).await;
        assert!(closed.needs_end());
        let closed = Ended::after_turn(sessions.take(&b.id, "m").unwrap()).await;
        assert!(!closed.needs_end());
        assert_eq!(
            sessions.turn(&a.id, "m").await.err(),
            Some(SessionError::Unknown(a.id.clone()))
        );
        assert!(sessions.take(&a.id, "m").is_err());
        let counts = sessions.counts();
        assert_eq!((counts.open, counts.created, counts.closed), (0, 2, 2));
    }

    #[test]
    fn a_stateful_models_sequence_slots_bound_its_sessions() {
        let sessions = table(Duration::from_secs(600), 100);
        let two = Some(SequenceBatching {
            idle_limit: Duration::from_secs(3600),
            slots: Some(2),
        });
        let first = sessions.create("m", two).unwrap().session;
        sessions.create("m", two).unwrap();
        let refused = sessions.create("m", two).unwrap_err();
        let SessionError::NoSequenceSlot {
            slots, retry_after, ..
        } = &refused
        else {
            panic!("{refused:?}");
        };
        assert_eq!(*slots, 2);
        assert!(
            *retry_after <= Duration::from_secs(600) && *retry_after >= Duration::from_secs(599)
        );
        assert!(
            refused.message().contains("model 'm' holds 2 sequences"),
            "{}",
            refused.message()
        );
        // Another model, and a stateless session, are not bounded by m's slots.
        sessions.create("n", two).unwrap();
        sessions.create("m", None).unwrap();
        // A closed session gives its slot back.
        sessions.take(&first.id, "m").unwrap();
        sessions.create("m", two).unwrap();
    }

    #[tokio::test]
    async fn the_bound_holds_and_idle_sessions_expire() {
        let sessions = table(Duration::from_millis(10), 2);
        let a = sessions.create("m", STATEFUL).unwrap().session;
        let b = sessions.create("m", STATEFUL).unwrap().session;
        assert!(matches!(
            sessions.create("m", STATEFUL).err(),
            Some(SessionError::Full { limit: 2, .. })
        ));
        // A session whose request is running does not expire.
        let busy = sessions.turn(&b.id, "m").await.unwrap();
        let later = Instant::now() + Duration::from_secs(1);
        let ended = sessions.expire_idle(later);
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].session.id, a.id);
        drop(busy);
        assert_eq!(sessions.take_model("m").len(), 1);
        assert!(sessions.turn(&b.id, "m").await.is_err());
        let counts = sessions.counts();
        assert_eq!((counts.open, counts.expired, counts.closed), (0, 1, 1));
        sessions.create("m", STATEFUL).unwrap();
    }

    #[tokio::test]
    async fn a_model_with_a_shorter_idle_limit_shortens_its_sessions() {
        let sessions = table(Duration::from_secs(1200), 8);
        let short = Some(SequenceBatching {
            idle_limit: Duration::from_secs(1),
            slots: None,
        });
        let opened = sessions.create("m", short).unwrap();
        let (a, expires) = (opened.session, opened.expires);
        assert_eq!(a.expiration, Duration::from_secs(1));
        let in_secs = expires
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        assert!(in_secs <= Duration::from_secs(1), "{in_secs:?}");
        assert_eq!(sessions.shortest_expiration(), Duration::from_secs(1));
        let b = sessions.create("n", STATEFUL).unwrap().session;
        assert_eq!(b.expiration, Duration::from_secs(1200));
        let later = Instant::now() + Duration::from_secs(2);
        let ended = sessions.expire_idle(later);
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].session.id, a.id);
    }

    #[tokio::test]
    async fn a_lost_session_leaves_the_table() {
        let sessions = table(Duration::from_secs(60), 4);
        let a = sessions.create("m", STATEFUL).unwrap().session;
        let turn = sessions.turn(&a.id, "m").await.unwrap();
        assert_eq!(turn.lost(), SessionError::Lost(a.id.clone()));
        drop(turn);
        assert_eq!(
            sessions.turn(&a.id, "m").await.err(),
            Some(SessionError::Unknown(a.id.clone()))
        );
        let counts = sessions.counts();
        assert_eq!((counts.open, counts.lost), (0, 1));
    }

    #[tokio::test]
    async fn a_close_waits_for_the_running_request_and_refuses_the_queued_ones() {
        let sessions = table(Duration::from_secs(60), 4);
        let a = sessions.create("m", STATEFUL).unwrap().session;
        let running = sessions.turn(&a.id, "m").await.unwrap();
        // A clone (a stream's) holds the turn too.
        let stream = running.clone();
        let queued = tokio::spawn({
            let (sessions, id) = (Arc::clone(&sessions), a.id.clone());
            async move { sessions.turn(&id, "m").await.err() }
        });
        let close = tokio::spawn({
            let (sessions, id) = (Arc::clone(&sessions), a.id.clone());
            async move { Ended::after_turn(sessions.take(&id, "m").unwrap()).await }
        });
        tokio::task::yield_now().await;
        drop(running);
        tokio::task::yield_now().await;
        assert!(
            !close.is_finished(),
            "the close went before the stream ended"
        );
        drop(stream);
        close.await.unwrap();
        assert_eq!(
            queued.await.unwrap(),
            Some(SessionError::Unknown(a.id.clone()))
        );
    }

    /// Sessions opened and left: once the least recently used of those in the way has been
    /// idle for the reclaim time, a new session takes its slot (it is ended, for its END), and
    /// until then the 429 says when that will be.
    #[tokio::test]
    async fn idle_sessions_give_their_slots_to_new_ones_least_recently_used_first() {
        let sessions = Arc::new(SessionTable::new(SessionSettings {
            expiration: Duration::from_secs(1200),
            max_sessions: 3,
            store_bytes: 100,
            reclaim_idle: Duration::from_secs(1),
        }));
        let two = Some(SequenceBatching {
            idle_limit: Duration::from_secs(3600),
            slots: Some(2),
        });
        let first = sessions.create("m", two).unwrap().session;
        let second = sessions.create("m", two).unwrap().session;
        let refused = sessions.create("m", two).err().unwrap();
        assert!(
            matches!(&refused, SessionError::NoSequenceSlot { retry_after, .. } if *retry_after == Duration::from_secs(1)),
            "{refused:?}"
        );
        tokio::time::sleep(Duration::from_millis(1100)).await;
        // The first is busy (a request running): the second, though used later, is taken.
        let busy = sessions.turn(&first.id, "m").await.unwrap();
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let third = sessions.create("m", two).unwrap();
        let reclaimed = third.reclaimed.expect("a slot was reclaimed");
        assert_eq!(reclaimed.session.id, second.id);
        assert!(reclaimed.needs_end() || !reclaimed.session.started());
        drop(reclaimed);
        assert_eq!(
            sessions.turn(&second.id, "m").await.err(),
            Some(SessionError::Unknown(second.id.clone()))
        );
        drop(busy);
        // The endpoint's own bound reclaims the same way.
        sessions.create("n", None).unwrap();
        let other = sessions.create("n", None);
        assert!(
            matches!(other, Err(SessionError::Full { .. })),
            "{:?}",
            other.err()
        );
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let other = sessions.create("n", None).unwrap();
        assert!(other.reclaimed.is_some());
        assert_eq!(sessions.counts().reclaimed, 2);
    }
}

//! The small key-value store each session offers plugins (`trident:session/store`): bounded in
//! bytes, dropped with its session.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Default for `TRIDENT_SESSION_STORE_BYTES`: the bytes of keys and values one session's store
/// may hold.
pub const DEFAULT_STORE_BYTES: usize = 64 * 1024;

/// One session's store.
#[derive(Debug)]
pub struct SessionStore {
    session_id: String,
    limit: usize,
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    values: BTreeMap<String, Vec<u8>>,
    bytes: usize,
}

impl SessionStore {
    /// An empty store of session `session_id`, holding at most `limit` bytes.
    pub fn new(session_id: String, limit: usize) -> SessionStore {
        SessionStore {
            session_id,
            limit,
            entries: Mutex::default(),
        }
    }

    fn entries(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session's id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.entries().values.get(key).cloned()
    }

    /// Keeps `value` under `key`, or says why not (the store is then unchanged).
    pub fn set(&self, key: String, value: Vec<u8>) -> Result<(), String> {
        let mut entries = self.entries();
        let replaced = entries
            .values
            .get(&key)
            .map_or(0, |old| key.len() + old.len());
        let bytes = entries.bytes - replaced + key.len() + value.len();
        if bytes > self.limit {
            return Err(format!(
                "the session's store holds at most {} bytes of keys and values; this would make \
                 it {bytes}",
                self.limit
            ));
        }
        entries.bytes = bytes;
        entries.values.insert(key, value);
        Ok(())
    }

    /// Forgets `key`.
    pub fn remove(&self, key: &str) {
        let mut entries = self.entries();
        if let Some(old) = entries.values.remove(key) {
            entries.bytes -= key.len() + old.len();
        }
    }

    /// The bytes of keys and values held.
    pub fn bytes(&self) -> usize {
        self.entries().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_counts_keys_and_values_and_replacements() {
        let store = SessionStore::new("s".into(), 10);
        store.set("ab".into(), b"1234".to_vec()).unwrap();
        assert_eq!(store.bytes(), 6);
        // Replacing counts the new value, not both.
        store.set("ab".into(), b"12345678".to_vec()).unwrap();
        assert_eq!(store.bytes(), 10);
        let refused = store.set("c".into(), Vec::new()).unwrap_err();
        assert!(refused.contains("at most 10 bytes"), "{refused}");
        assert_eq!(store.get("ab").as_deref(), Some(&b"12345678"[..]));
        store.remove("ab");
        store.remove("ab");
        assert_eq!((store.bytes(), store.get("ab")), (0, None));
        assert_eq!(store.session_id(), "s");
    }
}

//! The small key-value store each session offers plugins (`trident:session/store`): bounded in
//! bytes, dropped with its session. Each entry is charged its key, its value and
//! [`ENTRY_BYTES`] for what keeping it costs (its map node, the key's and value's allocations):
//! counting keys and values alone, one-character keys filled a 64 KiB store at 2.56 MB
//! resident; charged per entry, a full store is resident in about twice its bound.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Default for `TRIDENT_SESSION_STORE_BYTES`: the bytes one session's store may hold, keys,
/// values and [`ENTRY_BYTES`] an entry.
pub const DEFAULT_STORE_BYTES: usize = 64 * 1024;

/// What one entry costs beside its key and value: about what keeping it takes in memory (a
/// B-tree node's share, the `String` and `Vec` headers, two allocations' rounding), measured as
/// 98 bytes an entry of one-to-three-character keys and empty values.
pub const ENTRY_BYTES: usize = 96;

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
            .map_or(0, |old| key.len() + old.len() + ENTRY_BYTES);
        let bytes = entries.bytes - replaced + key.len() + value.len() + ENTRY_BYTES;
        if bytes > self.limit {
            return Err(format!(
                "the session's store holds at most {} bytes (keys, values and {ENTRY_BYTES} \
                 bytes an entry); this would make it {bytes}",
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
            entries.bytes -= key.len() + old.len() + ENTRY_BYTES;
        }
    }

    /// The bytes held: keys, values and [`ENTRY_BYTES`] an entry.
    pub fn bytes(&self) -> usize {
        self.entries().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_counts_keys_values_entries_and_replacements() {
        let limit = 2 * ENTRY_BYTES + 11;
        let store = SessionStore::new("s".into(), limit);
        store.set("ab".into(), b"1234".to_vec()).unwrap();
        assert_eq!(store.bytes(), ENTRY_BYTES + 6);
        // Replacing counts the new value, not both.
        store.set("ab".into(), b"12345678".to_vec()).unwrap();
        assert_eq!(store.bytes(), ENTRY_BYTES + 10);
        store.set("c".into(), Vec::new()).unwrap();
        let refused = store.set("d".into(), Vec::new()).unwrap_err();
        assert!(
            refused.contains(&format!("at most {limit} bytes")),
            "{refused}"
        );
        assert_eq!(store.get("ab").as_deref(), Some(&b"12345678"[..]));
        store.remove("ab");
        store.remove("ab");
        store.remove("c");
        assert_eq!((store.bytes(), store.get("ab")), (0, None));
        assert_eq!(store.session_id(), "s");
    }

    /// Tiny keys cannot fill a store with more entries than its bound pays for: at the
    /// default, 682 at most (they took 2.56 MB resident when only keys and values counted).
    #[test]
    fn tiny_keys_are_charged_per_entry() {
        let store = SessionStore::new("s".into(), DEFAULT_STORE_BYTES);
        let mut kept = 0;
        for index in 0..100_000 {
            if store.set(format!("{index:x}"), Vec::new()).is_err() {
                break;
            }
            kept += 1;
        }
        assert!(kept <= DEFAULT_STORE_BYTES / ENTRY_BYTES, "{kept} entries");
        assert!(kept > 600, "{kept} entries");
    }
}

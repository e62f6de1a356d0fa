//! A plugin's configuration as `host.config` answers it, noting which keys the guest asks for.
//!
//! A plugin's keys are the ones it reads; the manifest cannot know them, so the host watches the
//! plugin's `check-config` read them ([`crate::plugins::platform::loading`]): a key of the
//! manifest's `config` table it never asked for is a key it does not know (`stdev` for `std`,
//! `layuot`), refused at load with the keys it did ask for, instead of serving the defaults in
//! silence. The notes are flags beside the values (one store per read, no lock) and, for the
//! suggestion, the first 256 absent keys the guest asked for (short ones only).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The most absent keys noted for suggestions: a guest asking for invented keys in a loop
/// cannot grow the set past it.
const MAX_ASKED: usize = 256;
/// The longest absent key noted.
const MAX_KEY_LEN: usize = 128;

/// The configuration one plugin was loaded with, shared by every call of that load.
#[derive(Debug, Default)]
pub struct PluginConfig {
    /// The keys and values, sorted by key.
    entries: Vec<(String, String)>,
    /// Whether the guest asked for each entry's key.
    read: Vec<AtomicBool>,
    /// Keys the guest asked for that the configuration does not hold.
    asked_absent: Mutex<BTreeSet<String>>,
}

impl PluginConfig {
    /// The configuration of the manifest's `config` table.
    pub fn new(values: std::collections::BTreeMap<String, String>) -> PluginConfig {
        let entries: Vec<(String, String)> = values.into_iter().collect();
        let read = entries.iter().map(|_| AtomicBool::new(false)).collect();
        PluginConfig {
            entries,
            read,
            asked_absent: Mutex::default(),
        }
    }

    /// The value of `key`, noting that the guest asked for it.
    pub fn get(&self, key: &str) -> Option<String> {
        match self.entries.binary_search_by(|(k, _)| k.as_str().cmp(key)) {
            Ok(index) => {
                self.read[index].store(true, Ordering::Relaxed);
                Some(self.entries[index].1.clone())
            }
            Err(_) => {
                if key.len() <= MAX_KEY_LEN {
                    let mut asked = self
                        .asked_absent
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                    if asked.len() < MAX_ASKED && !asked.contains(key) {
                        asked.insert(key.to_owned());
                    }
                }
                None
            }
        }
    }

    /// The configuration's keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// Why the configuration holds keys the guest has not asked for, naming each with the key
    /// it most likely meant; `None` when the guest asked for every key.
    pub fn unread_keys(&self) -> Option<String> {
        let unread: Vec<&str> = self
            .entries
            .iter()
            .zip(&self.read)
            .filter(|(_, read)| !read.load(Ordering::Relaxed))
            .map(|((k, _), _)| k.as_str())
            .collect();
        if unread.is_empty() {
            return None;
        }
        let asked = self
            .asked_absent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        let known: BTreeSet<&str> = asked
            .iter()
            .map(String::as_str)
            .chain(
                self.entries
                    .iter()
                    .zip(&self.read)
                    .filter(|(_, read)| read.load(Ordering::Relaxed))
                    .map(|((k, _), _)| k.as_str()),
            )
            .collect();
        let named: Vec<String> = unread
            .iter()
            .map(|key| match nearest(key, &known) {
                Some(meant) => format!("`{key}` (did you mean `{meant}`?)"),
                None => format!("`{key}`"),
            })
            .collect();
        let (noun, verb) = match unread.len() {
            1 => ("key", "is"),
            _ => ("keys", "are"),
        };
        let listed = match known.is_empty() {
            true => "it asked for none".to_owned(),
            false => format!(
                "the keys it reads: {}",
                known.iter().copied().collect::<Vec<_>>().join(", ")
            ),
        };
        Some(format!(
            "config {noun} {} {verb} not read by this plugin ({listed}). A misspelled key would \
             leave its default serving; correct it or remove it (a plugin reads its keys in \
             check-config; one that reads a key only later can be loaded with \
             unread_config = \"warn\")",
            named.join(", ")
        ))
    }
}

/// The key of `known` closest to `key` by edit distance, when it is close enough to be a slip:
/// at most a third of the key's length (one edit at least), or one key begins the other
/// (`stdev` for `std`; three characters at least).
fn nearest<'a>(key: &str, known: &BTreeSet<&'a str>) -> Option<&'a str> {
    let most = (key.chars().count() / 3).max(1);
    known
        .iter()
        .map(|candidate| (edit_distance(key, candidate), *candidate))
        .filter(|(distance, candidate)| {
            let short = key.len().min(candidate.len());
            *distance <= most
                || (short >= 3 && (key.starts_with(candidate) || candidate.starts_with(key)))
        })
        .min()
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance with adjacent transpositions counted as one edit (`layuot` is one
/// from `layout`). Quadratic in the keys' lengths, which are short: keys in suggestions are
/// at most [`MAX_KEY_LEN`] and the manifest's keys its own.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let width = b.len() + 1;
    let mut rows = vec![0usize; (a.len() + 1) * width];
    for (j, cell) in rows.iter_mut().take(width).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        rows[i * width] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[(i - 1) * width + j] + 1)
                .min(rows[i * width + j - 1] + 1)
                .min(rows[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[(i - 2) * width + j - 2] + 1);
            }
            rows[i * width + j] = best;
        }
    }
    rows[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(keys: &[&str]) -> PluginConfig {
        PluginConfig::new(
            keys.iter()
                .map(|k| ((*k).to_owned(), "1".to_owned()))
                .collect(),
        )
    }

    #[test]
    fn every_key_read_is_no_complaint() {
        let c = config(&["mean", "std"]);
        assert_eq!(c.get("mean").as_deref(), Some("1"));
        assert_eq!(c.get("std").as_deref(), Some("1"));
        assert_eq!(c.get("layout"), None);
        assert_eq!(c.unread_keys(), None);
    }

    #[test]
    fn misspelled_keys_are_named_with_what_was_meant() {
        let c = config(&["stdev", "layuot", "max_lenght", "mean", "flavour"]);
        for key in ["std", "layout", "max_length", "mean"] {
            c.get(key);
        }
        let why = c.unread_keys().expect("unread keys");
        assert!(why.contains("`layuot` (did you mean `layout`?)"), "{why}");
        assert!(
            why.contains("`max_lenght` (did you mean `max_length`?)"),
            "{why}"
        );
        assert!(why.contains("`stdev` (did you mean `std`?)"), "{why}");
        assert!(
            why.contains("`flavour`,") || why.contains("`flavour` are"),
            "{why}"
        );
        assert!(!why.contains("`flavour` (did"), "{why}");
        assert!(
            why.contains("the keys it reads: layout, max_length, mean, std"),
            "{why}"
        );
    }

    #[test]
    fn a_plugin_that_reads_nothing_says_so() {
        let c = config(&["k"]);
        let why = c.unread_keys().expect("unread");
        assert!(why.contains("config key `k` is not read"), "{why}");
        assert!(why.contains("it asked for none"), "{why}");
    }

    #[test]
    fn absent_keys_asked_for_are_bounded() {
        let c = config(&["a"]);
        for i in 0..10_000 {
            c.get(&format!("key{i}"));
        }
        c.get(&"x".repeat(10_000));
        assert_eq!(c.asked_absent.lock().unwrap().len(), MAX_ASKED);
    }

    #[test]
    fn edit_distance_counts_a_swap_once() {
        assert_eq!(edit_distance("layuot", "layout"), 1);
        assert_eq!(edit_distance("stdev", "std"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}

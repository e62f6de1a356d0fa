//! What trident withholds from a plugin's output, counted per plugin for `/metrics`: log lines
//! over a call's output budget and reply headers that belong to trident; and the calls of its
//! stream adapter, made on a stream's own task.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The bytes of log output (`host.log`, stdout and stderr together) one call may write; what
/// comes after is dropped, with one line saying so. A guest logging in a loop until its
/// deadline would otherwise write tens of megabytes per request into the server's log.
pub const OUTPUT_BUDGET_BYTES: usize = 32 * 1024;

/// Counters of one loaded plugin (reset when the plugins are reloaded).
#[derive(Debug, Default)]
pub struct PluginCounters {
    output_dropped_bytes: AtomicU64,
    reply_headers_dropped: AtomicU64,
    reply_header_drop_logged: AtomicBool,
    stream_calls: AtomicU64,
    stream_failures: AtomicU64,
}

impl PluginCounters {
    /// Bytes of output dropped over the per-call budget, since the plugin was loaded.
    pub fn output_dropped_bytes(&self) -> u64 {
        self.output_dropped_bytes.load(Ordering::Relaxed)
    }

    /// Reply headers dropped because trident owns them, since the plugin was loaded.
    pub fn reply_headers_dropped(&self) -> u64 {
        self.reply_headers_dropped.load(Ordering::Relaxed)
    }

    /// Calls of the stream adapter (one per event and one per stream's end), since the plugin
    /// was loaded.
    pub fn stream_calls(&self) -> u64 {
        self.stream_calls.load(Ordering::Relaxed)
    }

    /// Stream-adapter calls that ended their stream with an error event.
    pub fn stream_failures(&self) -> u64 {
        self.stream_failures.load(Ordering::Relaxed)
    }

    /// Counts one stream-adapter call, and whether it failed.
    pub fn add_stream_call(&self, failed: bool) {
        self.stream_calls.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.stream_failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(in crate::plugins) fn add_output_dropped(&self, bytes: u64) {
        self.output_dropped_bytes
            .fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts `count` dropped reply headers; true the first time, so the caller logs once per
    /// plugin instead of once per request.
    pub fn add_reply_headers_dropped(&self, count: u64) -> bool {
        self.reply_headers_dropped
            .fetch_add(count, Ordering::Relaxed);
        !self.reply_header_drop_logged.swap(true, Ordering::Relaxed)
    }
}

/// One call's share of [`OUTPUT_BUDGET_BYTES`].
#[derive(Debug)]
pub(in crate::plugins) struct OutputBudget {
    remaining: usize,
    dropped: u64,
}

impl Default for OutputBudget {
    fn default() -> OutputBudget {
        OutputBudget {
            remaining: OUTPUT_BUDGET_BYTES,
            dropped: 0,
        }
    }
}

impl OutputBudget {
    /// `Ok` when a piece of `len` bytes may be logged; else it is counted as dropped and the
    /// error says whether it is the call's first dropped piece (log the "truncated" line then).
    pub(in crate::plugins) fn admit(&mut self, len: usize) -> Result<(), bool> {
        if self.dropped == 0 && len <= self.remaining {
            self.remaining -= len;
            return Ok(());
        }
        let first = self.dropped == 0;
        self.dropped += len as u64;
        Err(first)
    }

    /// Bytes dropped so far in this call.
    pub(in crate::plugins) fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_budget_is_dropped_and_counted_once_truncated() {
        let mut budget = OutputBudget::default();
        assert_eq!(budget.admit(OUTPUT_BUDGET_BYTES - 10), Ok(()));
        assert_eq!(budget.admit(10), Ok(()));
        assert_eq!(budget.admit(1), Err(true));
        assert_eq!(budget.admit(5), Err(false));
        assert_eq!(budget.dropped(), 6);
        // Once truncated, a later small piece stays dropped: the log keeps a prefix.
        let mut budget = OutputBudget::default();
        assert_eq!(budget.admit(OUTPUT_BUDGET_BYTES + 1), Err(true));
        assert_eq!(budget.admit(1), Err(false));
    }

    #[test]
    fn a_plugins_header_drops_are_logged_once() {
        let counters = PluginCounters::default();
        assert!(counters.add_reply_headers_dropped(2));
        assert!(!counters.add_reply_headers_dropped(1));
        assert_eq!(counters.reply_headers_dropped(), 3);
    }
}

//! Prometheus metrics: requests, errors and latency per route and model (only models the
//! endpoint has: `http::handle` picks the label), responses by status; plugin calls by plugin,
//! hook, variant and outcome, and what each plugin was refused; model loads and unloads; refused
//! connections; restarts of the serving process; stateful sessions; what the Triton core holds.
//! Served as text on the main port's metrics path and, when configured, a port of their own.
//! Every label value is escaped.

pub mod plugin_accounts;
pub mod shadows;

use crate::plugins::platform::accounting::Histogram;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::engine::InFlight;
use crate::sessions::SessionCounts;

/// Latency histogram bucket bounds, in seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];

#[derive(Default)]
struct Series {
    requests: u64,
    errors: u64,
    buckets: [u64; BUCKETS.len()],
    latency_sum: f64,
}

/// A model management outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The load or unload succeeded (`outcome="success"`).
    Success,
    /// The load or unload failed (`outcome="failure"`).
    Failure,
}

/// (plugin, hook, variant)
type PluginKey = (String, &'static str, String);

/// One plugin hook's calls in one variant: count and seconds by outcome, and their latency.
struct PluginCalls {
    by_outcome: BTreeMap<&'static str, (u64, f64)>,
    latency: Histogram,
}

/// What trident withheld from one loaded plugin.
#[derive(Debug, Clone, Default)]
pub struct PluginRow {
    /// The plugin's name (the `plugin` label).
    pub plugin: String,
    /// Bytes of log output dropped over the per-call budget, since the plugin was loaded.
    pub output_dropped_bytes: u64,
    /// Reply headers dropped because trident sets them, since the plugin was loaded.
    pub reply_headers_dropped: u64,
    /// Stream-adapter calls (one per event, one per stream's end), since the plugin was loaded.
    pub stream_calls: u64,
    /// Stream-adapter calls that ended their stream with an error event.
    pub stream_failures: u64,
}

/// The stateful sessions' gauge and counters (only when sessions are on).
fn render_sessions(out: &mut String, sessions: SessionCounts) {
    let _ = writeln!(
        out,
        "# HELP trident_sessions_open Stateful sessions open now.\n\
         # TYPE trident_sessions_open gauge\n\
         trident_sessions_open {}\n\
         # HELP trident_session_store_bytes Bytes the open sessions' plugin stores hold.\n\
         # TYPE trident_session_store_bytes gauge\n\
         trident_session_store_bytes {}",
        sessions.open, sessions.store_bytes
    );
    for (event, help, value) in [
        ("created", "Stateful sessions opened.", sessions.created),
        (
            "closed",
            "Stateful sessions closed by their client, or ended with their model or the server.",
            sessions.closed,
        ),
        (
            "expired",
            "Stateful sessions that expired while idle.",
            sessions.expired,
        ),
        (
            "lost",
            "Stateful sessions that ended because their model no longer held their sequence.",
            sessions.lost,
        ),
        (
            "reclaimed",
            "Stateful sessions idle past TRIDENT_SESSION_RECLAIM_IDLE_SECS ended to give their slot to a new session.",
            sessions.reclaimed,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP trident_sessions_{event}_total {help}\n\
             # TYPE trident_sessions_{event}_total counter\n\
             trident_sessions_{event}_total {value}"
        );
    }
}

/// The server's metrics.
#[derive(Default)]
pub struct Metrics {
    series: Mutex<HashMap<(&'static str, String), Series>>,
    statuses: Mutex<HashMap<(&'static str, u16), u64>>,
    plugin_calls: Mutex<HashMap<PluginKey, PluginCalls>>,
    loads: Mutex<HashMap<Outcome, u64>>,
    unloads: Mutex<HashMap<Outcome, u64>>,
    connections_refused: AtomicU64,
    /// Serving processes the supervisor restarted before this one.
    restarts: AtomicU64,
    /// How python models are confined here: the setting and the kernel's Landlock ABI.
    python_isolation: std::sync::OnceLock<(&'static str, u32)>,
    /// How the serving process's writes are confined: the setting and what the kernel enforced.
    serving_isolation: std::sync::OnceLock<(&'static str, &'static str)>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Metrics {
    /// Records one answered request.
    pub fn observe(&self, route: &'static str, model: &str, status: u16, latency: Duration) {
        let seconds = latency.as_secs_f64();
        {
            let mut series = lock(&self.series);
            let entry = match series.get_mut(&(route, model.to_owned())) {
                Some(entry) => entry,
                None => series.entry((route, model.to_owned())).or_default(),
            };
            entry.requests += 1;
            entry.errors += u64::from(status >= 400);
            entry.latency_sum += seconds;
            if let Some(bucket) = BUCKETS.iter().position(|&bound| seconds <= bound) {
                entry.buckets[bucket] += 1;
            }
        }
        *lock(&self.statuses).entry((route, status)).or_default() += 1;
    }

    /// Records one plugin call: `hook` is `request` or `response`; `outcome` is `ok`, `refused`
    /// (the plugin's own error), `trap`, `timeout` or `memory`, as `trident_plugin_hook_calls_total`
    /// names them.
    pub fn observe_plugin(
        &self,
        plugin: &str,
        hook: &'static str,
        variant: &str,
        outcome: &'static str,
        latency: Duration,
    ) {
        let mut calls = lock(&self.plugin_calls);
        let series = calls
            .entry((plugin.to_owned(), hook, variant.to_owned()))
            .or_insert_with(|| PluginCalls {
                by_outcome: BTreeMap::new(),
                latency: Histogram::seconds(),
            });
        let counts = series.by_outcome.entry(outcome).or_insert((0, 0.0));
        counts.0 += 1;
        counts.1 += latency.as_secs_f64();
        series.latency.observe_duration(latency);
    }

    /// Drops the request series of `model` (unloaded, or never loaded), and the plugin call
    /// series of every plugin for which `plugin_exists` is false.
    pub fn forget_model(&self, model: &str, plugin_exists: impl Fn(&str) -> bool) {
        lock(&self.series).retain(|(_, named), _| named != model);
        self.forget_plugins(plugin_exists);
    }

    /// Drops the plugin call series of every plugin for which `plugin_exists` is false (after
    /// a reload swapped the container's plugins, or an unload took a model's).
    pub fn forget_plugins(&self, plugin_exists: impl Fn(&str) -> bool) {
        lock(&self.plugin_calls).retain(|(plugin, ..), _| plugin_exists(plugin));
    }

    /// Counts one multi-model endpoint load (`trident_model_loads_total`).
    pub fn model_loaded(&self, outcome: Outcome) {
        *lock(&self.loads).entry(outcome).or_default() += 1;
    }

    /// Counts one multi-model endpoint unload (`trident_model_unloads_total`).
    pub fn model_unloaded(&self, outcome: Outcome) {
        *lock(&self.unloads).entry(outcome).or_default() += 1;
    }

    /// How many serving processes the supervisor restarted before this one.
    pub fn set_restarts(&self, restarts: u32) {
        self.restarts.store(u64::from(restarts), Ordering::Relaxed);
    }

    /// Records how python models are confined here (once, at start).
    pub fn set_python_isolation(&self, setting: &'static str, landlock_abi: u32) {
        let _ = self.python_isolation.set((setting, landlock_abi));
    }

    /// Records how the serving process's writes are confined (`TRIDENT_SERVING_ISOLATION` and
    /// what the kernel enforced: `full`, `partial` or `none`).
    pub fn set_serving_isolation(&self, setting: &'static str, enforced: &'static str) {
        let _ = self.serving_isolation.set((setting, enforced));
    }

    /// Counts a connection refused because the server was at its connection limit.
    pub fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition, with the engine's in-flight gauges and what trident
    /// withheld from each loaded plugin.
    pub fn render_with(
        &self,
        in_flight: InFlight,
        plugins: &[PluginRow],
        sessions: Option<SessionCounts>,
    ) -> String {
        let mut out = self.render();
        if let Some(sessions) = sessions {
            render_sessions(&mut out, sessions);
        }
        for (name, help, value) in [
            (
                "trident_plugin_output_dropped_bytes_total",
                "Bytes of plugin log output dropped over the per-call budget, since the plugin was loaded.",
                (|row: &PluginRow| row.output_dropped_bytes) as fn(&PluginRow) -> u64,
            ),
            (
                "trident_plugin_reply_headers_dropped_total",
                "Reply headers dropped because trident sets them, since the plugin was loaded.",
                |row: &PluginRow| row.reply_headers_dropped,
            ),
            (
                "trident_plugin_stream_calls_total",
                "Stream-adapter calls (one per event, one per stream's end), since the plugin was loaded.",
                |row: &PluginRow| row.stream_calls,
            ),
            (
                "trident_plugin_stream_failures_total",
                "Stream-adapter calls that ended their stream with an error event.",
                |row: &PluginRow| row.stream_failures,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for row in plugins {
                let _ = writeln!(
                    out,
                    "{name}{{plugin=\"{}\"}} {}",
                    label_value(&row.plugin),
                    value(row)
                );
            }
        }
        let refused = self.connections_refused.load(Ordering::Relaxed);
        let restarts = self.restarts.load(Ordering::Relaxed);
        let _ = write!(
            out,
            "# HELP trident_connections_refused_total Connections answered 503 at the connection limit.\n\
             # TYPE trident_connections_refused_total counter\n\
             trident_connections_refused_total {refused}\n\
             # HELP trident_restarts_total Serving processes that ended abnormally and were replaced by the supervisor.\n\
             # TYPE trident_restarts_total counter\n\
             trident_restarts_total {restarts}\n\
             # HELP trident_engine_requests_in_flight Requests the Triton core holds.\n\
             # TYPE trident_engine_requests_in_flight gauge\n\
             trident_engine_requests_in_flight {}\n\
             # HELP trident_engine_output_buffers Output buffers the Triton core holds.\n\
             # TYPE trident_engine_output_buffers gauge\n\
             trident_engine_output_buffers {}\n",
            in_flight.requests, in_flight.output_buffers
        );
        if let Some((setting, abi)) = self.python_isolation.get() {
            let _ = write!(
                out,
                "# HELP trident_python_isolation How python models' processes are confined: \
                 TRIDENT_PYTHON_ISOLATION and the kernel's Landlock ABI (0: none).\n\
                 # TYPE trident_python_isolation gauge\n\
                 trident_python_isolation{{setting=\"{setting}\",landlock_abi=\"{abi}\"}} 1\n"
            );
        }
        if let Some((setting, enforced)) = self.serving_isolation.get() {
            let _ = write!(
                out,
                "# HELP trident_serving_isolation How the serving process's writes are confined: \
                 TRIDENT_SERVING_ISOLATION and what the kernel enforced.\n\
                 # TYPE trident_serving_isolation gauge\n\
                 trident_serving_isolation{{setting=\"{setting}\",enforced=\"{enforced}\"}} 1\n"
            );
        }
        out
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_requests(&mut out);
        self.render_statuses(&mut out);
        self.render_plugin_calls(&mut out);
        self.render_model_lifecycle(&mut out);
        out
    }

    /// Requests, errors and the latency histogram, by route and model.
    fn render_requests(&self, out: &mut String) {
        let series = lock(&self.series);
        let mut keys: Vec<_> = series.keys().collect();
        keys.sort();
        out.push_str("# HELP trident_requests_total Requests answered, by route and model.\n");
        out.push_str("# TYPE trident_requests_total counter\n");
        for key in &keys {
            let _ = writeln!(
                out,
                "trident_requests_total{} {}",
                labels(key),
                series[*key].requests
            );
        }
        out.push_str(
            "# HELP trident_request_errors_total Requests answered with a 4xx or 5xx status.\n",
        );
        out.push_str("# TYPE trident_request_errors_total counter\n");
        for key in &keys {
            let _ = writeln!(
                out,
                "trident_request_errors_total{} {}",
                labels(key),
                series[*key].errors
            );
        }
        out.push_str(
            "# HELP trident_request_duration_seconds Time from request to response head.\n",
        );
        out.push_str("# TYPE trident_request_duration_seconds histogram\n");
        for key in &keys {
            let entry = &series[*key];
            let base = labels(key);
            let inner = &base[1..base.len() - 1];
            let mut cumulative = 0;
            for (bound, count) in BUCKETS.iter().zip(entry.buckets) {
                cumulative += count;
                let _ = writeln!(
                    out,
                    "trident_request_duration_seconds_bucket{{{inner},le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "trident_request_duration_seconds_bucket{{{inner},le=\"+Inf\"}} {}",
                entry.requests
            );
            let _ = writeln!(
                out,
                "trident_request_duration_seconds_sum{base} {}",
                entry.latency_sum
            );
            let _ = writeln!(
                out,
                "trident_request_duration_seconds_count{base} {}",
                entry.requests
            );
        }
    }

    fn render_statuses(&self, out: &mut String) {
        out.push_str("# HELP trident_responses_total Responses by route and status code.\n");
        out.push_str("# TYPE trident_responses_total counter\n");
        let statuses = lock(&self.statuses);
        let mut codes: Vec<_> = statuses.iter().collect();
        codes.sort();
        for ((route, status), count) in codes {
            let _ = writeln!(
                out,
                "trident_responses_total{{route=\"{route}\",status=\"{status}\"}} {count}"
            );
        }
        drop(statuses);
    }

    fn render_plugin_calls(&self, out: &mut String) {
        let calls = lock(&self.plugin_calls);
        let mut keys: Vec<_> = calls.keys().collect();
        keys.sort();
        let labels = |(plugin, hook, variant): &PluginKey| {
            format!(
                "plugin=\"{}\",hook=\"{hook}\",variant=\"{}\"",
                label_value(plugin),
                label_value(variant)
            )
        };
        for (name, help, pick) in [
            (
                "trident_plugin_calls_total",
                "Plugin calls by plugin, hook, variant and outcome.",
                (|c: &(u64, f64)| c.0.to_string()) as fn(&(u64, f64)) -> String,
            ),
            (
                "trident_plugin_call_seconds_total",
                "Time spent in plugin calls.",
                |c: &(u64, f64)| c.1.to_string(),
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for key in &keys {
                let labels = labels(key);
                for (outcome, counts) in &calls[*key].by_outcome {
                    let _ = writeln!(
                        out,
                        "{name}{{{labels},outcome=\"{outcome}\"}} {}",
                        pick(counts)
                    );
                }
            }
        }
        out.push_str(
            "# HELP trident_plugin_call_duration_seconds Plugin call latency by plugin, hook and \
             variant, every outcome (a shadow's candidates: trident_plugin_shadow_duration_seconds).\n\
             # TYPE trident_plugin_call_duration_seconds histogram\n",
        );
        for key in keys {
            plugin_accounts::histogram(
                out,
                "trident_plugin_call_duration_seconds",
                &labels(key),
                &calls[key].latency.snapshot(),
            );
        }
    }

    /// Multi-model endpoint loads and unloads, by outcome.
    fn render_model_lifecycle(&self, out: &mut String) {
        for (name, help, map) in [
            (
                "trident_model_loads_total",
                "Multi-model endpoint loads.",
                &self.loads,
            ),
            (
                "trident_model_unloads_total",
                "Multi-model endpoint unloads.",
                &self.unloads,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let map = lock(map);
            for outcome in [Outcome::Success, Outcome::Failure] {
                let label = if outcome == Outcome::Success {
                    "success"
                } else {
                    "failure"
                };
                let _ = writeln!(
                    out,
                    "{name}{{outcome=\"{label}\"}} {}",
                    map.get(&outcome).copied().unwrap_or(0)
                );
            }
        }
    }
}

fn labels((route, model): &(&'static str, String)) -> String {
    format!("{{route=\"{route}\",model=\"{}\"}}", label_value(model))
}

/// `text` as a label value of the exposition format: backslash, double quote and line feed
/// escaped. Model, plugin and variant names come from clients and artifacts: unescaped, a name
/// holding `"} 1\n` would write lines of its own into the metrics.
fn label_value(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => escaped.push_str("\\\""),
            '\\' => escaped.push_str("\\\\"),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forgotten_model_takes_its_series_and_its_plugins_with_it() {
        let metrics = Metrics::default();
        let second = Duration::from_secs(1);
        metrics.observe("model_invoke", "gone", 200, second);
        metrics.observe("model_invoke", "kept", 200, second);
        metrics.observe_plugin("gone_csv", "request", "", "ok", second);
        metrics.observe_plugin("shared", "request", "", "ok", second);
        metrics.forget_model("gone", |plugin| plugin == "shared");
        let text = metrics.render();
        assert!(!text.contains("gone"), "{text}");
        assert!(text.contains("model=\"kept\"") && text.contains("plugin=\"shared\""));
    }

    #[test]
    fn renders_what_was_withheld_from_each_plugin() {
        let rows = [PluginRow {
            plugin: "frame_lie".into(),
            output_dropped_bytes: 1234,
            reply_headers_dropped: 14,
            stream_calls: 9,
            stream_failures: 2,
        }];
        let text = Metrics::default().render_with(InFlight::default(), &rows, None);
        assert!(
            text.contains("trident_plugin_output_dropped_bytes_total{plugin=\"frame_lie\"} 1234\n")
        );
        assert!(
            text.contains("trident_plugin_reply_headers_dropped_total{plugin=\"frame_lie\"} 14\n")
        );
        assert!(text.contains("# TYPE trident_plugin_reply_headers_dropped_total counter\n"));
        assert!(text.contains("trident_plugin_stream_calls_total{plugin=\"frame_lie\"} 9\n"));
        assert!(text.contains("trident_plugin_stream_failures_total{plugin=\"frame_lie\"} 2\n"));
    }

    /// Names from clients and artifacts cannot write lines of their own into the metrics.
    #[test]
    fn hostile_names_stay_inside_their_labels() {
        let hostile = "x\"} 1\nforged_total{a=\"\\";
        let metrics = Metrics::default();
        metrics.observe("invocations", hostile, 200, Duration::from_millis(3));
        metrics.observe_plugin(hostile, "request", hostile, "ok", Duration::from_millis(1));
        let rows = [PluginRow {
            plugin: hostile.into(),
            output_dropped_bytes: 1,
            reply_headers_dropped: 0,
            stream_calls: 0,
            stream_failures: 0,
        }];
        let text = metrics.render_with(InFlight::default(), &rows, None);
        assert!(
            !text.lines().any(|line| line.starts_with("forged_total")),
            "{text}"
        );
        let escaped = "x\\\"} 1\\nforged_total{a=\\\"\\\\";
        assert!(
            text.contains(&format!(
                "trident_plugin_calls_total{{plugin=\"{escaped}\",hook=\"request\",variant=\"{escaped}\",outcome=\"ok\"}} 1\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "trident_plugin_output_dropped_bytes_total{{plugin=\"{escaped}\"}} 1\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "trident_requests_total{{route=\"invocations\",model=\"{escaped}\"}} 1\n"
            )),
            "{text}"
        );
    }

    #[test]
    fn renders_counters_and_histograms() {
        let metrics = Metrics::default();
        metrics.observe("invocations", "add_sub", 200, Duration::from_millis(3));
        metrics.observe("invocations", "add_sub", 400, Duration::from_millis(30));
        metrics.model_loaded(Outcome::Success);
        let text = metrics.render();
        assert!(text.contains("trident_requests_total{route=\"invocations\",model=\"add_sub\"} 2"));
        assert!(
            text.contains(
                "trident_request_errors_total{route=\"invocations\",model=\"add_sub\"} 1"
            )
        );
        assert!(text.contains("trident_request_duration_seconds_bucket{route=\"invocations\",model=\"add_sub\",le=\"0.005\"} 1"));
        assert!(text.contains("trident_request_duration_seconds_bucket{route=\"invocations\",model=\"add_sub\",le=\"+Inf\"} 2"));
        assert!(text.contains("trident_responses_total{route=\"invocations\",status=\"400\"} 1"));
        assert!(text.contains("trident_model_loads_total{outcome=\"success\"} 1"));
        assert!(text.contains("trident_model_unloads_total{outcome=\"failure\"} 0"));
    }
}

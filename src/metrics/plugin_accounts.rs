//! Each loaded plugin's account on `/metrics` ([`crate::plugins::platform::accounting`]): one info series
//! per plugin (its digest, the key that signed it, the interface versions it implements) and,
//! per hook it exports, its calls by outcome and histograms of CPU time, peak guest memory and
//! slot waits per call; and for a plugin that may call models (`trident:models`), its model
//! calls, their tensors' bytes and a histogram of the time each call waited for them. Only plugins loaded now have series (the container's, `model=""`, and
//! each loaded model artifact's, `model="<name>"`), and only the first plugins whose hooks
//! number at most [`MAX_ACCOUNTED_HOOKS`] together have series (and info) of their own: the
//! rest are summed into one set per hook labelled `plugin="",model=""` (a manifest refuses an
//! empty plugin name), so that a multi-model endpoint of thousands of models keeps these under
//! about half a megabyte of `/metrics`.

use std::fmt::Write as _;

use super::label_value;
use crate::plugins::platform::accounting::{HistogramSnapshot, Hook, HookSnapshot, Outcome};

/// The most (plugin, hook) pairs with series of their own (each about 4 KB of text).
pub const MAX_ACCOUNTED_HOOKS: usize = 128;

/// One loaded plugin's account.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginAccountRow {
    /// The plugin's name in its manifest.
    pub plugin: String,
    /// The model whose artifact brought it; empty for the container's plugins.
    pub model: String,
    /// Its `.wasm` file's SHA-256.
    pub sha256: String,
    /// The key whose signature it carries (hex); empty when signatures are not required.
    pub signer: String,
    /// The `trident:plugin` versions whose worlds it exports.
    pub versions: &'static str,
    /// Each hook it exports, and its counters.
    pub hooks: Vec<(Hook, HookSnapshot)>,
    /// Whether its manifest entry names models its calls may call: only then has it model
    /// series.
    pub calls_models: bool,
}

/// Renders `rows` (the container's first, then the models' by name) into `out`.
pub fn render(out: &mut String, rows: &[PluginAccountRow]) {
    if rows.is_empty() {
        return;
    }
    // A plugin has series of its own while the bound allows all its hooks; past it, its hooks
    // are summed with the others'.
    let mut own: Vec<&PluginAccountRow> = Vec::new();
    let mut others: Vec<(Hook, HookSnapshot)> = Vec::new();
    let mut others_call_models = false;
    let mut accounted = 0;
    for row in rows {
        if accounted + row.hooks.len() <= MAX_ACCOUNTED_HOOKS {
            accounted += row.hooks.len();
            own.push(row);
            continue;
        }
        others_call_models |= row.calls_models;
        for (hook, snapshot) in &row.hooks {
            match others.iter_mut().find(|(h, _)| h == hook) {
                Some((_, sum)) => sum.add(snapshot),
                None => others.push((*hook, snapshot.clone())),
            }
        }
    }
    render_info(out, &own);
    let series: Vec<(String, &HookSnapshot, bool)> = own
        .iter()
        .flat_map(|row| {
            row.hooks
                .iter()
                .map(move |(hook, snapshot)| (*row, hook, snapshot))
        })
        .map(|(row, hook, snapshot)| {
            let labels = format!(
                "plugin=\"{}\",model=\"{}\",hook=\"{}\"",
                label_value(&row.plugin),
                label_value(&row.model),
                hook.name()
            );
            (labels, snapshot, row.calls_models)
        })
        .chain(others.iter().map(|(hook, snapshot)| {
            (
                format!("plugin=\"\",model=\"\",hook=\"{}\"", hook.name()),
                snapshot,
                others_call_models,
            )
        }))
        .collect();
    let all: Vec<(String, &HookSnapshot)> = series
        .iter()
        .map(|(labels, snapshot, _)| (labels.clone(), *snapshot))
        .collect();
    render_series(out, &all);
    let calling: Vec<(String, &HookSnapshot)> = series
        .into_iter()
        .filter(|(_, _, calls_models)| *calls_models)
        .map(|(labels, snapshot, _)| (labels, snapshot))
        .collect();
    render_model_series(out, &calling);
}

/// The model calls of each (plugin, hook) whose plugin may call models.
fn render_model_series(out: &mut String, series: &[(String, &HookSnapshot)]) {
    if series.is_empty() {
        return;
    }
    for (name, help, pick) in [
        (
            "trident_plugin_model_calls_total",
            "Model calls (trident:models) made by the calls of a loaded plugin's hook.",
            (|s: &HookSnapshot| s.model_calls) as fn(&HookSnapshot) -> u64,
        ),
        (
            "trident_plugin_model_bytes_total",
            "Bytes of tensors those model calls sent and received.",
            |s: &HookSnapshot| s.model_bytes,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (labels, snapshot) in series {
            let _ = writeln!(out, "{name}{{{labels}}} {}", pick(snapshot));
        }
    }
    let name = "trident_plugin_model_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} How long each call of a loaded plugin's hook that called models waited \
         for them.\n# TYPE {name} histogram"
    );
    for (labels, snapshot) in series {
        histogram(out, name, labels, &snapshot.model_seconds);
    }
}

/// One info line per plugin with series of its own.
fn render_info(out: &mut String, own: &[&PluginAccountRow]) {
    let _ = writeln!(
        out,
        "# HELP trident_plugin_info A loaded plugin: its digest, the key that signed it (empty \
         when signatures are not required) and the plugin interface versions it implements.\n\
         # TYPE trident_plugin_info gauge"
    );
    for row in own {
        let _ = writeln!(
            out,
            "trident_plugin_info{{plugin=\"{}\",model=\"{}\",sha256=\"{}\",signer=\"{}\",versions=\"{}\"}} 1",
            label_value(&row.plugin),
            label_value(&row.model),
            label_value(&row.sha256),
            label_value(&row.signer),
            row.versions
        );
    }
}

/// The calls and histograms of each (plugin, hook) with its labels.
fn render_series(out: &mut String, series: &[(String, &HookSnapshot)]) {
    let _ = writeln!(
        out,
        "# HELP trident_plugin_hook_calls_total Calls of each loaded plugin's hooks, by outcome \
         (ok, refused, trap, timeout, memory).\n# TYPE trident_plugin_hook_calls_total counter"
    );
    for (labels, snapshot) in series {
        for (outcome, count) in Outcome::ALL.iter().zip(snapshot.outcomes) {
            let _ = writeln!(
                out,
                "trident_plugin_hook_calls_total{{{labels},outcome=\"{}\"}} {count}",
                outcome.name()
            );
        }
    }
    for (name, help, pick) in [
        (
            "trident_plugin_cpu_seconds",
            "CPU time of each call of a loaded plugin's hook.",
            (|s: &HookSnapshot| &s.cpu_seconds) as fn(&HookSnapshot) -> &HistogramSnapshot,
        ),
        (
            "trident_plugin_peak_memory_bytes",
            "The largest a call's guest memory grew to.",
            |s: &HookSnapshot| &s.peak_memory_bytes,
        ),
        (
            "trident_plugin_slot_wait_seconds",
            "How long each call waited for a slot on the guest threads.",
            |s: &HookSnapshot| &s.wait_seconds,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (labels, snapshot) in series {
            histogram(out, name, labels, pick(snapshot));
        }
    }
}

/// The `_bucket`, `_sum` and `_count` lines of one histogram series.
pub fn histogram(out: &mut String, name: &str, labels: &str, histogram: &HistogramSnapshot) {
    for (bound, count) in histogram.cumulative() {
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {count}");
    }
    let count = histogram.count;
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", histogram.sum);
    let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::plugins::platform::accounting::{CallCost, PluginAccount};

    fn row(plugin: &str, model: &str, account: &PluginAccount) -> PluginAccountRow {
        PluginAccountRow {
            plugin: plugin.into(),
            model: model.into(),
            sha256: "ab".repeat(32),
            signer: String::new(),
            versions: "0.1.0",
            hooks: vec![(Hook::Request, account.snapshot(Hook::Request))],
            calls_models: false,
        }
    }

    #[test]
    fn each_plugin_hook_has_its_series_and_the_rest_are_summed() {
        let account = PluginAccount::default();
        let cost = CallCost {
            cpu: Duration::from_micros(300),
            peak_memory: 3 << 20,
            wait: Duration::ZERO,
            ..CallCost::default()
        };
        account.record(Hook::Request, Outcome::Ok, cost);
        account.record(Hook::Request, Outcome::Trap, cost);
        let mut out = String::new();
        render(
            &mut out,
            &[row("csv", "", &account), row("csv", "tenant\"a", &account)],
        );
        let labels = "plugin=\"csv\",model=\"\",hook=\"request\"";
        for line in [
            format!("trident_plugin_hook_calls_total{{{labels},outcome=\"trap\"}} 1"),
            format!("trident_plugin_cpu_seconds_bucket{{{labels},le=\"0.0005\"}} 2"),
            format!("trident_plugin_cpu_seconds_bucket{{{labels},le=\"+Inf\"}} 2"),
            format!("trident_plugin_peak_memory_bytes_bucket{{{labels},le=\"4194304\"}} 2"),
            format!("trident_plugin_slot_wait_seconds_count{{{labels}}} 2"),
            "trident_plugin_info{plugin=\"csv\",model=\"tenant\\\"a\",sha256=\"".to_owned(),
        ] {
            assert!(out.contains(&line), "{line} not in\n{out}");
        }
        // Past the bound, the rest are one summed set per hook.
        let many: Vec<PluginAccountRow> = (0..MAX_ACCOUNTED_HOOKS + 10)
            .map(|i| row("p", &format!("m{i}"), &account))
            .collect();
        let mut out = String::new();
        render(&mut out, &many);
        let summed = "plugin=\"\",model=\"\",hook=\"request\"";
        assert!(
            out.contains(&format!(
                "trident_plugin_hook_calls_total{{{summed},outcome=\"ok\"}} 10\n"
            )),
            "{out}"
        );
        let series = out.matches("trident_plugin_cpu_seconds_count{").count();
        assert_eq!(series, MAX_ACCOUNTED_HOOKS + 1);
        let mut none = String::new();
        render(&mut none, &[]);
        assert!(none.is_empty());
    }

    #[test]
    fn only_plugins_that_may_call_models_have_model_series() {
        use crate::plugins::runtime::model_calls::ModelSpent;
        let account = PluginAccount::default();
        let models = ModelSpent {
            calls: 3,
            bytes: 96,
            time: Duration::from_millis(2),
        };
        account.record(
            Hook::Request,
            Outcome::Ok,
            CallCost {
                models,
                ..CallCost::default()
            },
        );
        let mut calling = row("ocr", "", &account);
        calling.calls_models = true;
        let mut out = String::new();
        render(&mut out, &[calling, row("csv", "", &account)]);
        let labels = "plugin=\"ocr\",model=\"\",hook=\"request\"";
        for line in [
            format!("trident_plugin_model_calls_total{{{labels}}} 3"),
            format!("trident_plugin_model_bytes_total{{{labels}}} 96"),
            format!("trident_plugin_model_seconds_bucket{{{labels},le=\"0.005\"}} 1"),
        ] {
            assert!(out.contains(&line), "{line} not in\n{out}");
        }
        assert!(
            !out.contains("trident_plugin_model_calls_total{plugin=\"csv\""),
            "{out}"
        );
    }
}

//! Each shadow's verdicts and its candidates' call times on `/metrics`
//! ([`crate::plugins::platform::shadow`]): `trident_plugin_shadow_total{model,candidate,hook,outcome}` and
//! the histogram `trident_plugin_shadow_duration_seconds{model,candidate,hook}`, whose buckets
//! are those of the serving calls' `trident_plugin_call_duration_seconds`, so that a candidate
//! and an A/B variant are read the same way. Only the shadows of plugins loaded now; past
//! [`MAX_SHADOW_SERIES`] rows, the rest are summed into `model="",candidate=""` per hook.

use std::fmt::Write as _;

use super::label_value;
use super::plugin_accounts::histogram;
use crate::plugins::platform::accounting::HistogramSnapshot;
use crate::plugins::platform::shadow::Verdict;

/// The most shadow rows (model, candidate, hook) with series of their own.
pub const MAX_SHADOW_SERIES: usize = 128;

/// One shadow candidate's counts.
#[derive(Debug, Clone, PartialEq)]
pub struct ShadowRow {
    /// The model: the manifest's entry for the container's shadows (`*` for every model
    /// without one), the model's name for a model artifact's.
    pub model: String,
    /// The candidate plugin.
    pub candidate: String,
    /// `request` or `response`.
    pub hook: &'static str,
    /// Its verdicts, in [`Verdict::ALL`]'s order.
    pub verdicts: [u64; 4],
    /// Its calls' times.
    pub latency: HistogramSnapshot,
}

/// Renders `rows` into `out`.
pub fn render(out: &mut String, rows: &[ShadowRow]) {
    if rows.is_empty() {
        return;
    }
    let mut series: Vec<ShadowRow> = rows.iter().take(MAX_SHADOW_SERIES).cloned().collect();
    for row in rows.iter().skip(MAX_SHADOW_SERIES) {
        match series
            .iter_mut()
            .skip(MAX_SHADOW_SERIES)
            .find(|summed| summed.hook == row.hook)
        {
            Some(summed) => {
                for (mine, theirs) in summed.verdicts.iter_mut().zip(row.verdicts) {
                    *mine += theirs;
                }
                summed.latency.add(&row.latency);
            }
            None => series.push(ShadowRow {
                model: String::new(),
                candidate: String::new(),
                ..row.clone()
            }),
        }
    }
    let labels = |row: &ShadowRow| {
        format!(
            "model=\"{}\",candidate=\"{}\",hook=\"{}\"",
            label_value(&row.model),
            label_value(&row.candidate),
            row.hook
        )
    };
    let _ = writeln!(
        out,
        "# HELP trident_plugin_shadow_total Shadow candidates' verdicts beside the serving \
         adapter: same, differs, failed, skipped.\n# TYPE trident_plugin_shadow_total counter"
    );
    for row in &series {
        for (verdict, count) in Verdict::ALL.iter().zip(row.verdicts) {
            let _ = writeln!(
                out,
                "trident_plugin_shadow_total{{{},outcome=\"{}\"}} {count}",
                labels(row),
                verdict.name()
            );
        }
    }
    let name = "trident_plugin_shadow_duration_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Shadow candidates' call times.\n# TYPE {name} histogram"
    );
    for row in &series {
        histogram(out, name, &labels(row), &row.latency);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::platform::accounting::Histogram;

    fn row(model: &str, verdicts: [u64; 4]) -> ShadowRow {
        ShadowRow {
            model: model.into(),
            candidate: "csv_v2".into(),
            hook: "request",
            verdicts,
            latency: Histogram::seconds().snapshot(),
        }
    }

    #[test]
    fn verdicts_and_times_render_and_the_rest_are_summed() {
        let mut out = String::new();
        render(&mut out, &[row("affine", [9, 1, 0, 2])]);
        let labels = "model=\"affine\",candidate=\"csv_v2\",hook=\"request\"";
        assert!(
            out.contains(&format!(
                "trident_plugin_shadow_total{{{labels},outcome=\"differs\"}} 1\n"
            )),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                "trident_plugin_shadow_duration_seconds_count{{{labels}}} 0\n"
            )),
            "{out}"
        );
        let many: Vec<ShadowRow> = (0..MAX_SHADOW_SERIES + 3)
            .map(|i| row(&format!("m{i}"), [1, 0, 0, 0]))
            .collect();
        let mut out = String::new();
        render(&mut out, &many);
        let summed = "model=\"\",candidate=\"\",hook=\"request\"";
        assert!(
            out.contains(&format!(
                "trident_plugin_shadow_total{{{summed},outcome=\"same\"}} 3\n"
            )),
            "{out}"
        );
        assert_eq!(
            out.matches("trident_plugin_shadow_duration_seconds_count{")
                .count(),
            MAX_SHADOW_SERIES + 1
        );
    }
}

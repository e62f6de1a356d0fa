//! A/B variants of adapters: the weighted split, stickiness by inference id, the target-variant
//! header and the per-variant metrics.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![ab_split_stickiness_header_and_metrics,];

fn ab_split_stickiness_header_and_metrics(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("ab");
    let mut counts: HashMap<String, usize> = HashMap::new();
    let total = 400;
    for i in 0..total {
        let id = format!("inference-{i}");
        let response = send(
            at,
            "text/csv",
            Some("text/csv"),
            &[("X-Amzn-SageMaker-Inference-Id", &id)],
            "1\n",
        );
        ensure!(
            response.status == 200,
            "{} {}",
            response.status,
            response.text()
        );
        let variant = response
            .header("x-trident-variant")
            .ok_or("no variant header")?
            .to_owned();
        *counts.entry(variant).or_default() += 1;
    }
    let b = counts.get("b").copied().unwrap_or(0) as f64 / total as f64;
    ensure!(
        (0.62..=0.78).contains(&b),
        "b served {b:.2} of requests (weight 0.70): {counts:?}"
    );
    // Sticky on the inference id.
    let first = send(
        at,
        "text/csv",
        None,
        &[("X-Amzn-SageMaker-Inference-Id", "sticky-1")],
        "1\n",
    );
    let variant = first
        .header("x-trident-variant")
        .ok_or("no header")?
        .to_owned();
    for _ in 0..10 {
        let again = send(
            at,
            "text/csv",
            None,
            &[("X-Amzn-SageMaker-Inference-Id", "sticky-1")],
            "1\n",
        );
        ensure!(
            again.header("x-trident-variant") == Some(variant.as_str()),
            "not sticky"
        );
    }
    // The target variant wins.
    for target in ["a", "b"] {
        let response = send(
            at,
            "text/csv",
            None,
            &[
                ("X-Amzn-SageMaker-Target-Variant", target),
                ("X-Amzn-SageMaker-Inference-Id", "sticky-1"),
            ],
            "1\n",
        );
        ensure!(
            response.header("x-trident-variant") == Some(target),
            "target {target}: {:?}",
            response.headers
        );
    }
    let metrics = f.servers["ab"].1.metrics.render();
    for variant in ["a", "b"] {
        let line = format!(
            "trident_plugin_calls_total{{plugin=\"csv\",hook=\"request\",variant=\"{variant}\",outcome=\"ok\"}}"
        );
        ensure!(metrics.contains(&line), "no {line} in\n{metrics}");
    }
    Ok(())
}

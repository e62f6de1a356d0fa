//! `[models.<name>]`: which adapters serve a model: a pair, weighted variants, a shadow.

use serde::Deserialize;

/// The adapters of one model: a single pair, or weighted variants.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPlugins {
    /// The request adapter, by plugin name: a request or generate request adapter.
    #[serde(default)]
    pub request: Option<String>,
    /// The response adapter, by plugin name: a response, generate response or stream adapter.
    #[serde(default)]
    pub response: Option<String>,
    /// The pipeline, by plugin name, instead of `request` and `response`: the plugin answers
    /// the model's requests whole, calling the models its entry names (`trident:models`).
    #[serde(default)]
    pub pipeline: Option<String>,
    /// Weighted variants for an A/B test, instead of `request` and `response`.
    #[serde(default)]
    pub variants: Vec<VariantSpec>,
    /// Candidate adapters run beside the serving ones on a sample of requests, after the
    /// answer, and compared with them ([`super::super::shadow`]).
    #[serde(default)]
    pub shadow: Option<ShadowSpec>,
}

/// A shadow: candidate adapters compared with the serving ones on sampled live requests.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShadowSpec {
    /// The candidate request adapter, by plugin name.
    #[serde(default)]
    pub request: Option<String>,
    /// The candidate response adapter, by plugin name.
    #[serde(default)]
    pub response: Option<String>,
    /// The share of requests shadowed, above 0 and at most 1.
    pub sample: f64,
    /// Whether the log of a difference shows the values that differ (default: only where).
    #[serde(default)]
    pub log_values: bool,
    /// How near numbers must be to count as the same (numpy's `isclose`; its defaults).
    #[serde(default)]
    pub tolerance: crate::plugins::platform::cases::Tolerance,
}

/// One arm of an A/B test.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    /// The variant's name, unique within the model; a request's target variant names it.
    pub name: String,
    /// Its share of requests, relative to the other variants' weights; above zero.
    pub weight: u32,
    /// This variant's request adapter, by plugin name.
    #[serde(default)]
    pub request: Option<String>,
    /// This variant's response adapter, by plugin name.
    #[serde(default)]
    pub response: Option<String>,
    /// This variant's pipeline, by plugin name, instead of its request and response adapters.
    #[serde(default)]
    pub pipeline: Option<String>,
}

impl ShadowSpec {
    pub(super) fn check(&self) -> Result<(), String> {
        if self.request.is_none() && self.response.is_none() {
            return Err("name a candidate request or response adapter".into());
        }
        if !(self.sample > 0.0 && self.sample <= 1.0) {
            return Err(format!(
                "sample = {}: give the share of requests shadowed, above 0 and at most 1",
                self.sample
            ));
        }
        self.tolerance.check()
    }
}

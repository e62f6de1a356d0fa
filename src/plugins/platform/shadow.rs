//! Shadow adapters: a candidate beside the serving adapter, run on a sample of live requests
//! after their answer is made, its output compared with the serving adapter's, and the verdict
//! counted. The client's answer is never delayed or changed by it.
//!
//! ```toml
//! [models.my_model]
//! request = "csv"
//! response = "out"
//! shadow = { request = "csv_v2", response = "out_v2", sample = 0.1 }
//! ```
//!
//! - **Which requests.** `sample` of them (0 to 1): sticky on `X-Amzn-SageMaker-Inference-Id`
//!   (the same id is always shadowed or never), spread evenly over requests without one. A
//!   candidate request adapter shadows requests its serving adapter decoded; a candidate
//!   response adapter, answers its serving adapter wrote. The generate routes are not shadowed.
//! - **What is compared.** The candidate request adapter gets the same request and its
//!   tensors are compared with the serving adapter's (numbers within the tolerance); the
//!   candidate response adapter gets the same model outputs and its reply is compared with the
//!   serving one (status, content type and headers exactly; a JSON body within the tolerance,
//!   any other body byte for byte). The model runs once, for the serving adapter.
//! - **Verdicts.** `same`, `differs`, `failed` (the candidate refused, trapped or ran out of
//!   time or memory where the serving adapter answered), `skipped` (the shadow queue was full,
//!   or the candidate does not take the request's media type). The first
//!   [`LOGGED_DIFFERENCES`] differences of each shadow are logged with where the answers differ;
//!   the values themselves only with `log_values = true` (they are the client's data).
//! - **Budget.** Shadow calls start on the shadow thread, one thread at the lowest CPU
//!   priority (nice 19: it runs on what the serving and guest threads leave), never on a serving
//!   thread; a call that outlasts its first epoch tick moves to the guest threads, as every call
//!   does (run wholly at nice 19, a candidate on a busy machine ran out of its time limit waiting
//!   for CPU and was counted failed). Shadow calls run in a share of their own (a quarter of the
//!   engine's, at least one) and their primitives in permits of their own: they never take a
//!   slot of the share the requests are served in. A shadow that finds the shadow budget spent
//!   when its request's answer is made waits for a slot in a bounded queue
//!   ([`crate::plugins::runtime::engine::SHADOW_QUEUE`] per slot), in order; one that finds the
//!   queue full (as when the shadow thread gets no CPU) is skipped, so under load they are
//!   dropped first. (Before, a candidate held one of the engine's slots for
//!   its whole run: the serving adapter's wait for a slot rose by half with 12 MP images at c=8.)
//!   A request's verdicts are counted once its shadows' slot of the budget is back.
//! - **Counted** by the model whose request it was (a `*` entry's shadow has rows per model,
//!   [`MAX_SHADOW_MODELS`] at most).
//! - **Promote** a candidate by naming it in `request`/`response` and reloading; the shadow's
//!   counts go with the plugins it compared (a reload that leaves the shadow as it was keeps
//!   them: [`Shadow::continue_from`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;

use super::accounting::{Histogram, HistogramSnapshot};
use super::cases::Tolerance;
use super::cases::compare::differences;
use super::cases::outcome::{answered, reply_answer, request_answer};
use super::manifest::ShadowSpec;
use super::plugin::{LoadError, LoadedPlugin, refuse_unless};
use super::variants::stable_hash;
use crate::plugins::runtime::boundary::{AdaptedRequest, HookResult, PluginReply};

/// The differences of each shadow logged (per load of its plugins).
pub const LOGGED_DIFFERENCES: u32 = 10;

/// Which adapter a shadow call compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShadowHook {
    /// The request adapter.
    Request,
    /// The response adapter.
    Response,
}

impl ShadowHook {
    /// Its `hook` label.
    pub fn name(self) -> &'static str {
        match self {
            ShadowHook::Request => "request",
            ShadowHook::Response => "response",
        }
    }
}

/// What a shadow call found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The candidate answered as the serving adapter did.
    Same,
    /// It answered otherwise.
    Differs,
    /// It refused or failed where the serving adapter answered.
    Failed,
    /// It was not run: the budget was spent, or it does not take the request.
    Skipped,
}

impl Verdict {
    /// Every verdict, in the order of a shadow's counters.
    pub const ALL: [Verdict; 4] = [
        Verdict::Same,
        Verdict::Differs,
        Verdict::Failed,
        Verdict::Skipped,
    ];

    /// Its `outcome` label.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Differs => "differs",
            Verdict::Failed => "failed",
            Verdict::Skipped => "skipped",
        }
    }
}

#[derive(Debug)]
struct Tally {
    verdicts: [AtomicU64; 4],
    latency: Histogram,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            verdicts: Default::default(),
            latency: Histogram::seconds(),
        }
    }
}

/// The most models a shadow counts apart (a `*` entry shadows every model it serves); the
/// verdicts of further models are counted together under the model `""`.
pub const MAX_SHADOW_MODELS: usize = 64;

/// One shadow's verdicts and candidate times, by the model whose request each was and by hook.
/// Shared by the shadow of a reloaded manifest when its plugins are unchanged
/// ([`Shadow::continue_from`]).
#[derive(Debug, Default)]
struct Tallies {
    by_model: std::sync::Mutex<std::collections::BTreeMap<String, Arc<[Tally; 2]>>>,
}

impl Tallies {
    /// The tallies of `model`'s requests, made on its first verdict.
    fn of(&self, model: &str) -> Arc<[Tally; 2]> {
        let mut by_model = self
            .by_model
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(tally) = by_model.get(model) {
            return Arc::clone(tally);
        }
        let key = match by_model.len() < MAX_SHADOW_MODELS {
            true => model,
            false => "",
        };
        Arc::clone(
            by_model
                .entry(key.to_owned())
                .or_insert_with(|| Arc::new([Tally::new(), Tally::new()])),
        )
    }
}

/// One model's shadow: its candidates, how many requests it samples, and what it found.
pub struct Shadow {
    /// The model entry of the manifest it belongs to (`*` for every model without one).
    pub model: String,
    /// The candidate request adapter.
    pub request: Option<Arc<LoadedPlugin>>,
    /// The candidate response adapter.
    pub response: Option<Arc<LoadedPlugin>>,
    sample_per_million: u64,
    log_values: bool,
    tolerance: Tolerance,
    tallies: arc_swap::ArcSwap<Tallies>,
    logged: AtomicU32,
    requests: AtomicU64,
}

impl std::fmt::Debug for Shadow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = |p: &Option<Arc<LoadedPlugin>>| p.as_ref().map(|p| p.name.to_string());
        f.debug_struct("Shadow")
            .field("model", &self.model)
            .field("request", &name(&self.request))
            .field("response", &name(&self.response))
            .finish_non_exhaustive()
    }
}

impl Shadow {
    /// The shadow `spec` describes for `model`, its candidates found by `get` and checked to
    /// export the hooks they are compared on.
    pub fn of(
        model: &str,
        spec: &ShadowSpec,
        get: impl Fn(&Option<String>) -> Option<Arc<LoadedPlugin>>,
    ) -> Result<Shadow, LoadError> {
        let (request, response) = (get(&spec.request), get(&spec.response));
        for (plugin, exported, hook) in [
            (
                &request,
                request.as_ref().is_none_or(|p| p.hooks.request.is_some()),
                "request-adapter",
            ),
            (
                &response,
                response.as_ref().is_none_or(|p| p.hooks.response.is_some()),
                "response-adapter",
            ),
        ] {
            refuse_unless(
                plugin,
                exported,
                format!("model '{model}' shadows with it, and it does not export {hook}"),
            )?;
        }
        Ok(Shadow {
            model: model.to_owned(),
            request,
            response,
            sample_per_million: (spec.sample * 1e6).round() as u64,
            log_values: spec.log_values,
            tolerance: spec.tolerance,
            tallies: {
                let tallies = Tallies::default();
                // A model's own entry has its rows from the start, at zero.
                if model != "*" {
                    tallies.of(model);
                }
                arc_swap::ArcSwap::from_pointee(tallies)
            },
            logged: AtomicU32::new(0),
            requests: AtomicU64::new(0),
        })
    }

    /// Whether the request with `inference_id` is shadowed.
    pub fn sampled(&self, inference_id: Option<&str>) -> bool {
        let point = match inference_id {
            Some(id) => stable_hash(id).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11,
            None => {
                self.requests
                    .fetch_add(1, Ordering::Relaxed)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    >> 11
            }
        };
        point % 1_000_000 < self.sample_per_million
    }

    /// Counts a verdict on a request to `model`, and the candidate call's time when it ran.
    pub fn count(&self, model: &str, hook: ShadowHook, verdict: Verdict, took: Option<Duration>) {
        let tallies = self.tallies.load().of(model);
        let tally = &tallies[hook as usize];
        let at = Verdict::ALL.iter().position(|v| *v == verdict).unwrap_or(0);
        tally.verdicts[at].fetch_add(1, Ordering::Relaxed);
        if let Some(took) = took {
            tally.latency.observe_duration(took);
        }
    }

    /// The verdicts of `hook` so far by model, each in [`Verdict::ALL`]'s order, with its
    /// candidate's call times; sorted by model.
    pub fn snapshot(&self, hook: ShadowHook) -> Vec<(String, [u64; 4], HistogramSnapshot)> {
        let tallies = self.tallies.load();
        let by_model = tallies
            .by_model
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        by_model
            .iter()
            .map(|(model, tallies)| {
                let tally = &tallies[hook as usize];
                (
                    model.clone(),
                    std::array::from_fn(|i| tally.verdicts[i].load(Ordering::Relaxed)),
                    tally.latency.snapshot(),
                )
            })
            .collect()
    }

    /// Goes on counting where `earlier` (the same model entry's shadow before a reload) left
    /// off, when it runs the same candidates (`same`: by file, configuration, assets and
    /// limits) at the same sample: a reload that leaves a shadow as it was keeps its series.
    pub fn continue_from(
        &self,
        earlier: &Shadow,
        same: impl Fn(&Option<Arc<LoadedPlugin>>, &Option<Arc<LoadedPlugin>>) -> bool,
    ) {
        if self.model == earlier.model
            && self.sample_per_million == earlier.sample_per_million
            && same(&self.request, &earlier.request)
            && same(&self.response, &earlier.response)
        {
            self.tallies.store(earlier.tallies.load_full());
        }
    }

    /// The candidate of `hook`.
    pub fn candidate(&self, hook: ShadowHook) -> Option<&Arc<LoadedPlugin>> {
        match hook {
            ShadowHook::Request => self.request.as_ref(),
            ShadowHook::Response => self.response.as_ref(),
        }
    }

    /// The verdict on a candidate request adapter's result beside the serving one's, logging
    /// the first differences.
    pub fn judge_request(
        &self,
        model: &str,
        serving: AdaptedRequest,
        candidate: HookResult<AdaptedRequest>,
        inference_id: Option<&str>,
    ) -> Verdict {
        let Ok(candidate) = answered(candidate) else {
            return Verdict::Failed;
        };
        let expected = request_answer(model, serving);
        let got = request_answer(model, candidate);
        self.judge(ShadowHook::Request, &expected, &got, inference_id)
    }

    /// The verdict on a candidate response adapter's reply beside the serving one.
    pub fn judge_response(
        &self,
        serving: &PluginReply,
        candidate: HookResult<PluginReply>,
        inference_id: Option<&str>,
    ) -> Verdict {
        let Ok(candidate) = answered(candidate) else {
            return Verdict::Failed;
        };
        let mut expected = reply_answer(Ok(serving.clone()));
        // A JSON body is compared as JSON, within the tolerance; any other byte for byte.
        if let Some(fields) = expected.as_object_mut()
            && fields.contains_key("json")
        {
            fields.remove("body");
        }
        let got = reply_answer(Ok(candidate));
        self.judge(ShadowHook::Response, &expected, &got, inference_id)
    }

    fn judge(
        &self,
        hook: ShadowHook,
        expected: &Value,
        got: &Value,
        inference_id: Option<&str>,
    ) -> Verdict {
        // A candidate that refuses where the serving adapter answered failed; any other
        // difference is a difference.
        if got.get("status") != expected.get("status") && got.get("message").is_some() {
            return Verdict::Failed;
        }
        let found = differences(expected, got, self.tolerance);
        if found.is_empty() {
            return Verdict::Same;
        }
        if self.logged.fetch_add(1, Ordering::Relaxed) < LOGGED_DIFFERENCES {
            let shown: Vec<String> = if self.log_values {
                found
            } else {
                // Where they differ, not the client's values.
                found
                    .iter()
                    .map(|d| d.split(": ").next().unwrap_or("").to_owned())
                    .collect()
            };
            let candidate = self.candidate(hook).map(|p| p.name.to_string());
            tracing::warn!(
                model = %self.model,
                candidate = candidate.as_deref().unwrap_or(""),
                hook = hook.name(),
                inference_id = inference_id.unwrap_or(""),
                differences = %shown.join("; "),
                "a shadow adapter answered otherwise than the serving one"
            );
        }
        Verdict::Differs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shadow(sample: f64) -> Shadow {
        let spec = ShadowSpec {
            request: None,
            response: None,
            sample,
            log_values: false,
            tolerance: Tolerance::default(),
        };
        Shadow::of("m", &spec, |_| None).unwrap()
    }

    #[test]
    fn the_sample_is_the_share_asked_for_and_sticky_on_the_inference_id() {
        let tenth = shadow(0.1);
        let by_count = (0..100_000).filter(|_| tenth.sampled(None)).count();
        assert!((9_500..10_500).contains(&by_count), "{by_count}");
        let by_id = (0..100_000)
            .filter(|i| tenth.sampled(Some(&format!("req-{i}"))))
            .count();
        assert!((9_500..10_500).contains(&by_id), "{by_id}");
        for id in ["a", "b", "req-7"] {
            let first = tenth.sampled(Some(id));
            assert!((0..20).all(|_| tenth.sampled(Some(id)) == first));
        }
        let all = shadow(1.0);
        assert!((0..1000).all(|_| all.sampled(None)));
    }

    #[test]
    fn verdicts_are_counted_by_hook() {
        let tenth = shadow(0.1);
        tenth.count(
            "m",
            ShadowHook::Request,
            Verdict::Same,
            Some(Duration::from_micros(80)),
        );
        tenth.count(
            "m",
            ShadowHook::Request,
            Verdict::Differs,
            Some(Duration::from_micros(90)),
        );
        tenth.count("m", ShadowHook::Response, Verdict::Skipped, None);
        let rows = tenth.snapshot(ShadowHook::Request);
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].0.as_str(), rows[0].1), ("m", [1, 1, 0, 0]));
        assert_eq!(rows[0].2.count, 2);
        let rows = tenth.snapshot(ShadowHook::Response);
        assert_eq!(rows[0].1, [0, 0, 0, 1]);
        assert_eq!(rows[0].2.count, 0);
    }

    #[test]
    fn a_star_shadow_counts_by_the_model_served_within_a_bound() {
        let spec = ShadowSpec {
            request: None,
            response: None,
            sample: 1.0,
            log_values: false,
            tolerance: Tolerance::default(),
        };
        let star = Shadow::of("*", &spec, |_| None).unwrap();
        assert!(star.snapshot(ShadowHook::Request).is_empty());
        star.count("resnet", ShadowHook::Request, Verdict::Same, None);
        star.count("bert", ShadowHook::Request, Verdict::Differs, None);
        star.count("resnet", ShadowHook::Request, Verdict::Same, None);
        let rows: Vec<(String, [u64; 4])> = star
            .snapshot(ShadowHook::Request)
            .into_iter()
            .map(|(model, verdicts, _)| (model, verdicts))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("bert".to_owned(), [0, 1, 0, 0]),
                ("resnet".to_owned(), [2, 0, 0, 0])
            ]
        );
        for i in 0..200 {
            star.count(&format!("m{i}"), ShadowHook::Request, Verdict::Same, None);
        }
        let rows = star.snapshot(ShadowHook::Request);
        assert_eq!(rows.len(), MAX_SHADOW_MODELS + 1);
        let rest = rows.iter().find(|(model, ..)| model.is_empty()).unwrap();
        assert_eq!(rest.1, [200 - (MAX_SHADOW_MODELS as u64 - 2), 0, 0, 0]);
        // A reload that leaves the shadow as it was goes on counting; another sample starts again.
        let again = Shadow::of("*", &spec, |_| None).unwrap();
        again.continue_from(&star, |a, b| a.is_none() && b.is_none());
        assert_eq!(
            again.snapshot(ShadowHook::Request).len(),
            MAX_SHADOW_MODELS + 1
        );
        let changed = Shadow::of(
            "*",
            &ShadowSpec {
                sample: 0.5,
                ..spec
            },
            |_| None,
        )
        .unwrap();
        changed.continue_from(&star, |a, b| a.is_none() && b.is_none());
        assert!(changed.snapshot(ShadowHook::Request).is_empty());
    }

    #[test]
    fn replies_compare_json_within_the_tolerance_and_other_bodies_byte_for_byte() {
        let tenth = shadow(0.1);
        let reply = |body: &str| PluginReply {
            status: 200,
            content_type: "application/json".into(),
            headers: Vec::new(),
            body: body.as_bytes().to_vec(),
        };
        let judge = |serving: &str, candidate: &str| {
            tenth.judge_response(&reply(serving), Ok(Ok(reply(candidate))), None)
        };
        assert_eq!(judge("[0.5, 1]", "[0.5000001,1.0]"), Verdict::Same);
        assert_eq!(judge("[0.5, 1]", "[0.6, 1]"), Verdict::Differs);
        assert_eq!(judge("a,b", "a,b"), Verdict::Same);
        assert_eq!(judge("a,b", "a, b"), Verdict::Differs);
        let refused = Ok(Err(crate::plugins::runtime::boundary::Refusal::BadRequest(
            "no".into(),
        )));
        assert_eq!(
            tenth.judge_response(&reply("1"), refused, None),
            Verdict::Failed
        );
    }
}

//! Starting a shadow's candidate after a request's answer is made ([`crate::plugins::platform::shadow`]):
//! on the shadow thread, within the shadow budget, its verdict counted.

use std::sync::Arc;
use std::time::Instant;

use super::PluginHost;
use crate::engine::InferResponse;
use crate::plugins::platform::shadow::{Shadow, ShadowHook, Verdict};
use crate::plugins::{AdaptedRequest, PluginInvocation, PluginReply};

/// A request whose answer a shadow compares with its candidate's: what the candidate is
/// called with, and what the serving adapter made of it.
pub struct ShadowCall {
    /// The model's shadow.
    pub shadow: Arc<Shadow>,
    /// The model the request was for.
    pub model: String,
    /// The request's inference id, for the log.
    pub inference_id: Option<String>,
    /// The request as the candidate sees it.
    pub invocation: PluginInvocation,
    /// What the serving adapter answered.
    pub serving: Serving,
}

/// What a serving adapter answered, to compare the candidate's with.
pub enum Serving {
    /// The serving request adapter's result.
    Request(AdaptedRequest),
    /// The serving response adapter's reply, and the model's outputs it was made of.
    Response(PluginReply, Box<InferResponse>),
}

impl PluginHost {
    /// Every shadow of this host's manifest.
    pub fn shadows(&self) -> impl Iterator<Item = &Arc<Shadow>> {
        self.routes.shadows()
    }

    /// Runs the candidates of one request's shadow `calls` on the shadow thread, one after
    /// the other, after the answer, and counts their verdicts once the shadow budget's slot is
    /// back; skipped (and counted so) when the shadow budget has no room.
    pub fn shadow(self: &Arc<Self>, calls: Vec<ShadowCall>) {
        if calls.is_empty() {
            return;
        }
        let skipped: Vec<(Arc<Shadow>, String, ShadowHook)> = calls
            .iter()
            .map(|call| {
                let model = call.model.clone();
                (Arc::clone(&call.shadow), model, call.serving.hook())
            })
            .collect();
        let host = Arc::clone(self);
        let run = async move {
            let mut verdicts = Vec::with_capacity(calls.len());
            for call in calls {
                verdicts.extend(host.judge(call).await);
            }
            verdicts
        };
        // The verdicts are counted once the shadow's slot of the budget is back: a client that
        // sees them counted finds the budget free for its next request's shadows.
        let count = |verdicts: Vec<Judged>| {
            for (shadow, model, hook, verdict, took) in verdicts {
                shadow.count(&model, hook, verdict, Some(took));
            }
        };
        if !self.runtime.spawn_shadow(run, count) {
            for (shadow, model, hook) in skipped {
                shadow.count(&model, hook, Verdict::Skipped, None);
            }
        }
    }

    /// Calls `call`'s candidate and judges its answer, for counting.
    async fn judge(&self, call: ShadowCall) -> Option<Judged> {
        let hook = call.serving.hook();
        let candidate = call.shadow.candidate(hook).cloned()?;
        let started = Instant::now();
        let id = call.inference_id.as_deref();
        let (verdict, took) = match call.serving {
            Serving::Request(serving) => {
                let result = self.adapt_request(&candidate, &call.invocation).await;
                let took = started.elapsed();
                let verdict = call.shadow.judge_request(&call.model, serving, result, id);
                (verdict, took)
            }
            Serving::Response(serving, response) => {
                let result = self
                    .adapt_response(&candidate, &call.invocation, &response)
                    .await;
                let took = started.elapsed();
                (call.shadow.judge_response(&serving, result, id), took)
            }
        };
        Some((call.shadow, call.model, hook, verdict, took))
    }
}

/// A candidate's verdict, to be counted: the shadow, the request's model, the hook, the
/// verdict and the candidate's time.
type Judged = (
    Arc<Shadow>,
    String,
    ShadowHook,
    Verdict,
    std::time::Duration,
);

impl Serving {
    /// The hook whose candidate it is compared with.
    fn hook(&self) -> ShadowHook {
        match self {
            Serving::Request(_) => ShadowHook::Request,
            Serving::Response(..) => ShadowHook::Response,
        }
    }
}

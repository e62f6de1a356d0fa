//! Golden cases run through the host ([`crate::plugins::platform::cases`]): each case's hook called as a
//! request's would be, its model calls answered by the case (`StandIns`), what it answered
//! compared with what the case expects; a plugin whose case fails keeps its whole manifest out
//! (`gate`, in every load).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

use serde_json::{Value, json};

use super::PluginHost;
use crate::engine::{EngineError, ErrorCode, InferRequest, InferResponse, OutputTensor};
use crate::plugins::platform::cases::outcome::{
    answered, generate_request_answer, headers, output_tensors, reply_answer, request_answer,
    responses,
};
use crate::plugins::platform::cases::{Case, CaseHook, Cases, compare};
use crate::plugins::platform::plugin::{LoadError, LoadedPlugin};
use crate::plugins::runtime::model_calls::ModelCaller;
use crate::plugins::{PluginInvocation, StreamPosition};

/// What running one plugin's cases found.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Each case's name, and its differences (none: it passed).
    pub results: Vec<(String, Vec<String>)>,
    /// How long the cases took together.
    pub took: Duration,
}

impl Report {
    /// The first failing case's name and differences.
    pub fn first_failure(&self) -> Option<(&str, &[String])> {
        self.results
            .iter()
            .find(|(_, differences)| !differences.is_empty())
            .map(|(name, differences)| (name.as_str(), differences.as_slice()))
    }
}

/// Runs the cases of `plugin` through `host`, in order: every one (`trident plugin test`), or
/// until the first that fails (`to_the_end` false: a load, which that failure refuses, so that
/// a plugin that loops in every case costs the load one time limit, not one per case).
pub async fn run_plugin(
    host: &PluginHost,
    plugin: &Arc<LoadedPlugin>,
    cases: &Cases,
    to_the_end: bool,
) -> Report {
    let started = Instant::now();
    let mut results = Vec::with_capacity(cases.cases.len());
    for case in &cases.cases {
        let tolerance = case.tolerance.unwrap_or(cases.tolerance);
        let differences = match (of(host, plugin, cases, case).await, cases.expected(case)) {
            (Ok(answer), Ok(expected)) => compare::differences(&expected, &answer, tolerance),
            (Err(why), _) | (_, Err(why)) => vec![why],
        };
        let failed = !differences.is_empty();
        results.push((case.name.clone(), differences));
        if failed && !to_the_end {
            break;
        }
    }
    Report {
        results,
        took: started.elapsed(),
    }
}

/// Runs the cases of every plugin of `host` that carries some; the first plugin with a failing
/// case refuses the load, naming the case and its first differences.
pub async fn gate(host: &PluginHost) -> Result<(), LoadError> {
    for plugin in host.plugins() {
        let Some(cases) = plugin.cases.clone() else {
            continue;
        };
        let report = run_plugin(host, plugin, &cases, false).await;
        if let Some((name, differences)) = report.first_failure() {
            return Err(LoadError {
                plugin: plugin.name.to_string(),
                message: format!(
                    "golden case '{}' fails: {}",
                    name.escape_debug(),
                    differences.join("; ")
                ),
            });
        }
        tracing::info!(
            plugin = %plugin.name,
            cases = report.results.len(),
            took_ms = report.took.as_millis(),
            "golden cases passed"
        );
        // The account is of the plugin's traffic: the cases' calls are not kept in it.
        plugin.account.load().reset();
    }
    Ok(())
}

/// Runs `case` through `host`'s call path (the plugin's limits, a fresh instance per call) and
/// returns what the plugin answered; `Err` when the plugin does not export the case's hook.
pub async fn of(
    host: &PluginHost,
    plugin: &Arc<LoadedPlugin>,
    cases: &Cases,
    case: &Case,
) -> Result<Value, String> {
    let headers = headers(case)?;
    // SageMaker's headers as a request's are read; the case's own fields over them.
    let mut invocation = crate::invocation::Invocation::from_headers(&headers);
    invocation.content_type = case.content_type.clone();
    invocation.accept = case.accept.clone();
    if let Some(attributes) = &case.custom_attributes {
        invocation.custom_attributes = Some(attributes.clone());
    }
    let body = cases.body(case)?;
    let mut wit = PluginInvocation::new(
        "/invocations",
        &case.model,
        &invocation,
        &headers,
        &plugin.headers,
        &body,
        None,
    );
    if plugin.calls_models() {
        let answers = cases.model_answers(case)?;
        wit = wit.with_models(Arc::new(StandIns {
            answers: Mutex::new(answers.into()),
        }));
    }
    let outputs = cases.outputs(case)?;
    let (hook, export) = case.hook.export();
    if !plugin.exports(hook) {
        return Err(format!("the plugin does not export {export}"));
    }
    Ok(match case.hook {
        CaseHook::Request => match answered(host.adapt_request(plugin, &wit).await) {
            Ok(adapted) => request_answer(&case.model, adapted),
            Err(refusal) => refusal,
        },
        CaseHook::Response => {
            let response = InferResponse {
                model_name: case.model.clone(),
                model_version: 1,
                id: None,
                parameters: Vec::new(),
                outputs: output_tensors(&outputs)?,
            };
            reply_answer(answered(host.adapt_response(plugin, &wit, &response).await))
        }
        CaseHook::GenerateRequest => {
            match answered(host.adapt_generate_request(plugin, &wit).await) {
                Ok(adapted) => generate_request_answer(adapted),
                Err(refusal) => refusal,
            }
        }
        CaseHook::GenerateResponse => {
            let responses = responses(&outputs)?;
            reply_answer(answered(
                host.adapt_generate_response(plugin, &wit, responses).await,
            ))
        }
        CaseHook::Oom => {
            let message = String::from_utf8_lossy(&body).into_owned();
            match answered(host.classify_oom(plugin, &message).await.map(Ok)) {
                Ok(verdict) => json!({"status": 200, "out_of_memory": verdict}),
                Err(failure) => failure,
            }
        }
        CaseHook::Stream => stream_answer(host, plugin, &wit, responses(&outputs)?).await,
        CaseHook::Pipeline => reply_answer(answered(host.handle(plugin, &wit).await)),
    })
}

/// A case's answers to the plugin's model calls, taken in order: a call of the model the next
/// answer names gets it; any other call, or one past them, is `unavailable`.
struct StandIns {
    answers: Mutex<VecDeque<(String, Vec<OutputTensor>)>>,
}

impl ModelCaller for StandIns {
    fn infer(
        &self,
        request: InferRequest,
    ) -> BoxFuture<'static, Result<InferResponse, EngineError>> {
        let next = self
            .answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front();
        let model = request.model_name;
        let answer = match next {
            Some((named, outputs)) if named == model => Ok(InferResponse {
                model_name: model,
                model_version: 1,
                id: None,
                parameters: Vec::new(),
                outputs,
            }),
            Some((named, _)) => Err(EngineError::new(
                ErrorCode::Unavailable,
                format!("the golden case's next model answer is for '{named}', not this call"),
            )),
            None => Err(EngineError::new(
                ErrorCode::Unavailable,
                "the golden case gives no answer for this call (models = [...])",
            )),
        };
        Box::pin(std::future::ready(answer))
    }
}

async fn stream_answer(
    host: &PluginHost,
    plugin: &Arc<LoadedPlugin>,
    wit: &PluginInvocation,
    responses: Vec<Vec<u8>>,
) -> Value {
    let state = Arc::new(crate::plugins::StreamState::new());
    let mut events = Vec::new();
    let calls = responses.into_iter().map(Some).chain([None]);
    for (index, event) in (0u64..).zip(calls) {
        let position = StreamPosition {
            stream_id: "case".into(),
            created: 0,
            index,
        };
        let payloads = host
            .adapt_stream(plugin, wit, &position, event, &state, None)
            .await;
        match answered(payloads) {
            Ok(payloads) => events.extend(
                payloads
                    .into_iter()
                    .map(|p| serde_json::from_str(&p).unwrap_or(Value::from(p))),
            ),
            Err(mut refusal) => {
                refusal["events"] = Value::from(events);
                return refusal;
            }
        }
    }
    json!({"status": 200, "events": events})
}

//! One call of `TRITONBACKEND_ModelInstanceExecute`: every request answered (an error response
//! where it failed, a panic included), its statistics reported, and released.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use crate::clock::now_ns;
use crate::error::{BackendError, Code};
use crate::ffi;
use crate::model::InstanceState;
use crate::models::{
    add_sub, classifier, identity, required, scalar_i32, streams, text_classifier,
};
use crate::request::{Input, Request};
use crate::response::{Output, Response, ResponseFactory};
use crate::settings::{ModelKind, ModelSettings};
use crate::statistics;

/// How one request went: whether it succeeded, and how many batch rows it carried.
struct Served {
    ok: bool,
    rows: u64,
}

/// Serves `requests` on `instance`. Takes ownership of every request: each is answered and
/// released before this returns, whatever happens, so the entry point always reports success.
///
/// # Safety
/// `instance` and `requests` are what Triton passed to `TRITONBACKEND_ModelInstanceExecute`,
/// and `state` is that instance's state.
pub unsafe fn run(
    instance: *mut ffi::TRITONBACKEND_ModelInstance,
    state: &InstanceState,
    requests: &[*mut ffi::TRITONBACKEND_Request],
) {
    let exec_start = now_ns();
    // SAFETY: each pointer is a request Triton handed to this execute, adopted once here.
    let requests: Vec<Request> = requests
        .iter()
        .map(|r| unsafe { Request::adopt(*r) })
        .collect();
    let mut rows = 0u64;
    for request in &requests {
        let compute_start = now_ns();
        let served = catch_unwind(AssertUnwindSafe(|| serve(state, request, requests.len())))
            .unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(BackendError::internal(format!(
                    "the trident backend failed on model {}: {what}",
                    state.model
                )))
            });
        let served = served.unwrap_or_else(|error| {
            answer_with_error(state.settings.kind, request, error);
            Served { ok: false, rows: 1 }
        });
        rows += served.rows;
        let compute_end = now_ns();
        // SAFETY: the instance and the request are live (the request is released only when
        // `requests` drops, after this).
        unsafe {
            statistics::request(
                instance,
                request.raw(),
                served.ok,
                exec_start,
                compute_start,
                compute_end,
            )
        };
    }
    // SAFETY: the instance is live for the whole execute.
    unsafe { statistics::batch(instance, rows, exec_start, exec_start, now_ns()) };
    drop(requests);
}

/// Answers a request that failed before any response went out, with `error` as its final
/// response.
fn answer_with_error(kind: ModelKind, request: &Request, error: BackendError) {
    let sent = if kind.is_decoupled() {
        ResponseFactory::new(request)
            .and_then(|factory| Response::from_factory(&factory))
            .and_then(|response| response.send(true, Some(error)))
    } else {
        Response::new(request).and_then(|response| response.send(true, Some(error)))
    };
    // Nothing else can reach the client: Triton answers a request released without a final
    // response itself.
    drop(sent);
}

/// Serves one request. An `Err` means no final response went out: the caller sends it.
fn serve(
    state: &InstanceState,
    request: &Request,
    in_execution: usize,
) -> Result<Served, BackendError> {
    let settings = &state.settings;
    if let Some(code) = settings.exit_code {
        // A test model of a native library that ends its host: nothing else runs after it.
        std::process::exit(i32::from(code));
    }
    let inputs = request.inputs()?;
    let rows = if settings.max_batch_size > 0 {
        inputs
            .first()
            .and_then(|input| input.shape.first())
            .map_or(1, |rows| u64::try_from(*rows).unwrap_or(0))
    } else {
        1
    };
    if settings.kind.is_decoupled() {
        stream(settings, request, &inputs)?;
        return Ok(Served { ok: true, rows });
    }
    wait(request, settings.delay_ms)?;
    if let Some(failure) = &settings.failure {
        return Err(failure.clone());
    }
    let requested = request.requested_outputs()?;
    let outputs: Vec<Output<'_>> = match settings.kind {
        ModelKind::Identity => identity::outputs(
            &requested,
            inputs,
            in_execution,
            settings.max_batch_size > 0,
        )?,
        ModelKind::AddSub => add_sub::outputs(&requested, &inputs)?,
        ModelKind::Classifier => classifier::outputs(
            &requested,
            &inputs,
            settings.classes,
            settings.max_batch_size > 0,
        )?,
        ModelKind::TextClassifier => text_classifier::outputs(
            &requested,
            &inputs,
            settings.classes,
            settings.max_batch_size > 0,
        )?,
        ModelKind::SequenceSum => {
            let input = required(&inputs, "INPUT")?;
            let value = scalar_i32(input)?;
            let total = state
                .sums
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .step(request.correlation_id()?, request.flags()?, value)?;
            vec![Output {
                name: "OUTPUT".into(),
                dtype: crate::dtype::DataType::I32,
                shape: input.shape.clone(),
                data: total.to_le_bytes().to_vec().into(),
            }]
        }
        ModelKind::TextStream | ModelKind::Repeat | ModelKind::TokenStream => {
            unreachable!("decoupled models stream above")
        }
    };
    let mut response = Response::new(request)?;
    let error = outputs
        .iter()
        .try_for_each(|output| response.add_output(output))
        .err();
    let ok = error.is_none();
    // Sent either way: a failed send leaves nothing to retry.
    let _ = response.send(true, error);
    Ok(Served { ok, rows })
}

/// Serves one request of a decoupled model: its responses through a factory, then the final
/// flag. An `Err` means nothing was sent.
fn stream(
    settings: &ModelSettings,
    request: &Request,
    inputs: &[Input<'_>],
) -> Result<(), BackendError> {
    let plan: Box<dyn streams::Plan> = match settings.kind {
        ModelKind::TextStream => Box::new(streams::TextPlan::new(inputs)?),
        ModelKind::TokenStream => Box::new(streams::TokenPlan::new(inputs)?),
        _ => Box::new(streams::RepeatPlan::new(inputs)?),
    };
    if let Some(failure) = &settings.failure {
        return Err(failure.clone());
    }
    let factory = ResponseFactory::new(request)?;
    streams::run(
        plan.as_ref(),
        &factory,
        Duration::from_millis(settings.delay_ms),
    )
}

/// Waits `delay_ms`, in slices, giving up when the client cancels.
fn wait(request: &Request, delay_ms: u64) -> Result<(), BackendError> {
    if delay_ms == 0 {
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_millis(delay_ms);
    loop {
        if request.is_cancelled() {
            return Err(BackendError::new(
                Code::Cancelled,
                "the request was cancelled",
            ));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(10)));
    }
}

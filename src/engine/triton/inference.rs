//! Asynchronous inference: a request is built from an [`InferRequest`], handed to Triton, and its
//! responses come back from Triton's threads into tokio through a channel.
//!
//! Ownership across the C boundary:
//! - the `TRITONSERVER_InferenceRequest` and a boxed [`RequestContext`] (holding the inputs'
//!   `Bytes`, which Triton reads in place) belong to Triton from `InferAsync` until the release
//!   callback, which deletes both;
//! - a boxed [`ResponseContext`] (the channel's sender) belongs to the response callback until
//!   the call flagged final, which frees it, so the stream ends.
//!
//! Callbacks never unwind into C: their work runs under `catch_unwind`.

use std::os::raw::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::convert::datatype_to_raw;
use super::error::{check, to_cstring};
use super::ffi;
use super::handle::Owned;
use super::library::Triton;
use super::response::{Classification, read_response};
use super::server::Server;
use crate::engine::{EngineError, ErrorCode};
use crate::engine::{InferRequest, InferResponse, InputTensor, ParameterValue, SequenceId};

type ResponseResult = Result<InferResponse, EngineError>;

/// A request pointer that Triton owns while the request is in flight.
struct RequestPtr(*mut ffi::TRITONSERVER_InferenceRequest);

// SAFETY: Triton's request object may be cancelled from any thread; the pointer is only used
// under the `SubmittedRequest` lock, which the release callback also takes before deleting it.
unsafe impl Send for RequestPtr {}

/// What the stream and the release callback share: the request, while Triton still has it.
struct SubmittedRequest {
    triton: &'static Triton,
    request: Mutex<Option<RequestPtr>>,
}

impl SubmittedRequest {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<RequestPtr>> {
        self.request.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Released with the request: the input bytes Triton has been reading.
struct RequestContext {
    _inputs: Vec<Bytes>,
    in_flight: Arc<SubmittedRequest>,
}

/// Owned by the response callback until the final response.
struct ResponseContext {
    triton: &'static Triton,
    sender: mpsc::UnboundedSender<ResponseResult>,
    classification: Option<Classification>,
}

/// A request Triton does not own yet (before `InferAsync` succeeds), deleted on drop.
type UnsubmittedRequest = Owned<ffi::TRITONSERVER_InferenceRequest>;

impl Server {
    /// Submits an inference. The returned stream yields each response (one for most models,
    /// any number for decoupled ones) and ends after the last. Dropping the stream early cancels
    /// the request in Triton. `batched` says whether the model's first dimension is the batch
    /// (its `max_batch_size` is above 0): outputs asked for as classes are classified per batch
    /// entry then.
    pub fn infer(
        &self,
        request: InferRequest,
        batched: bool,
    ) -> Result<ResponseStream, EngineError> {
        let unsubmitted = self.new_request(&request)?;
        let inputs = describe(&unsubmitted, &request)?;
        let classification = (!request.classification.is_empty()).then_some(Classification {
            outputs: request.classification,
            batched,
        });
        self.submit(unsubmitted, inputs, classification)
    }

    /// `TRITONSERVER_InferenceRequestNew` for `request`'s model, asked again when the core
    /// answers that the model is unknown. With model namespacing (on by default), the core
    /// (2.51, and its main branch) finds a model's name in its `global_map_` without the lock
    /// that a load or unload of any other model holds while it copies a new map over it: a
    /// request that lands in that copy is told its loaded model does not exist (seen in CI as a
    /// 400 for one model while two others unloaded). The copy takes microseconds, unless its
    /// thread is preempted, so the name is looked up again after two yields, 0.1, 1 and 5 ms
    /// (6.1 ms at most, for a name that is unknown indeed).
    fn new_request(&self, request: &InferRequest) -> Result<UnsubmittedRequest, EngineError> {
        const PAUSES_US: [u64; 5] = [0, 0, 100, 1_000, 5_000];
        let triton = self.triton();
        let model = to_cstring("model name", &request.model_name)?;
        let mut pauses = PAUSES_US.iter();
        loop {
            // SAFETY: `InferenceRequestNew` writes a new request the caller owns; valid server;
            // the model name outlives the call.
            let made: Result<UnsubmittedRequest, EngineError> = unsafe {
                Owned::create(triton, |raw| {
                    triton.api.TRITONSERVER_InferenceRequestNew(
                        raw,
                        self.raw(),
                        model.as_ptr(),
                        request.model_version.unwrap_or(-1),
                    )
                })
            };
            let unknown = made
                .as_ref()
                .is_err_and(|e| e.message.starts_with("Request for unknown model"));
            match pauses.next() {
                Some(&pause) if unknown => match pause {
                    0 => std::thread::yield_now(),
                    us => std::thread::sleep(std::time::Duration::from_micros(us)),
                },
                _ => return made,
            }
        }
    }

    /// Hands a described request to Triton with its callbacks; on success Triton owns it.
    fn submit(
        &self,
        unsubmitted: UnsubmittedRequest,
        inputs: Vec<Bytes>,
        classification: Option<Classification>,
    ) -> Result<ResponseStream, EngineError> {
        let triton = self.triton();
        let api = &triton.api;
        let ptr = unsubmitted.as_ptr();
        let in_flight = Arc::new(SubmittedRequest {
            triton,
            request: Mutex::new(None),
        });
        let request_context = Box::into_raw(Box::new(RequestContext {
            _inputs: inputs,
            in_flight: Arc::clone(&in_flight),
        }));
        let (sender, receiver) = mpsc::unbounded_channel();
        let response_context = Box::into_raw(Box::new(ResponseContext {
            triton,
            sender,
            classification,
        }));

        // SAFETY: `ptr` is our unsubmitted request; the release callback's context is a live
        // box whose ownership passes to the callback only if `InferAsync` succeeds.
        let submitted = check(api, unsafe {
            api.TRITONSERVER_InferenceRequestSetReleaseCallback(
                ptr,
                Some(release_request),
                request_context.cast(),
            )
        })
        .and_then(|()| {
            // SAFETY: as above for the response context; the allocator lives for the process.
            check(api, unsafe {
                api.TRITONSERVER_InferenceRequestSetResponseCallback(
                    ptr,
                    triton.allocator.as_ptr(),
                    std::ptr::null_mut(),
                    Some(complete_response),
                    response_context.cast(),
                )
            })
        })
        .and_then(|()| {
            // Publish the pointer before Triton can release it; the release callback takes
            // the same lock, so it cannot run its delete before this store is visible.
            *in_flight.lock() = Some(RequestPtr(ptr));
            // SAFETY: valid server and request, both callbacks set.
            check(api, unsafe {
                api.TRITONSERVER_ServerInferAsync(self.raw(), ptr, std::ptr::null_mut())
            })
        });
        match submitted {
            Ok(()) => {
                super::counters::request_submitted();
                // Triton owns the request now; its release callback deletes it.
                unsubmitted.into_raw();
                Ok(ResponseStream {
                    receiver,
                    in_flight,
                    finished: false,
                })
            }
            Err(error) => {
                in_flight.lock().take();
                // SAFETY: Triton refused the request, so neither callback will run: the boxes
                // are still ours and are freed exactly once, here.
                unsafe {
                    drop(Box::from_raw(request_context));
                    drop(Box::from_raw(response_context));
                }
                drop(unsubmitted);
                Err(error)
            }
        }
    }
}

/// Sets id, timeout, priority, sequence, parameters, inputs and requested outputs on a new
/// request; returns the input buffers, which must stay alive until Triton releases the request.
fn describe(r: &UnsubmittedRequest, request: &InferRequest) -> Result<Vec<Bytes>, EngineError> {
    let api = &r.triton().api;
    if let Some(id) = &request.id {
        r.set_text(api.TRITONSERVER_InferenceRequestSetId, "request id", id)?;
    }
    if let Some(timeout) = request.timeout {
        let micros = u64::try_from(timeout.as_micros()).unwrap_or(u64::MAX);
        r.set(
            api.TRITONSERVER_InferenceRequestSetTimeoutMicroseconds,
            micros,
        )?;
    }
    if let Some(priority) = request.priority {
        r.set(api.TRITONSERVER_InferenceRequestSetPriorityUInt64, priority)?;
    }
    match &request.sequence.id {
        Some(SequenceId::Number(id)) => {
            r.set(api.TRITONSERVER_InferenceRequestSetCorrelationId, *id)?
        }
        Some(SequenceId::String(id)) => r.set_text(
            api.TRITONSERVER_InferenceRequestSetCorrelationIdString,
            "sequence id",
            id,
        )?,
        None => {}
    }
    let mut flags = 0;
    if request.sequence.start {
        flags |= ffi::TRITONSERVER_REQUEST_FLAG_SEQUENCE_START;
    }
    if request.sequence.end {
        flags |= ffi::TRITONSERVER_REQUEST_FLAG_SEQUENCE_END;
    }
    if flags != 0 {
        r.set(api.TRITONSERVER_InferenceRequestSetFlags, flags)?;
    }
    for (key, value) in &request.parameters {
        set_parameter(r, key, value)?;
    }
    let mut buffers = Vec::with_capacity(request.inputs.len());
    for input in &request.inputs {
        add_input(r, input)?;
        buffers.push(input.data.clone());
    }
    for output in &request.requested_outputs {
        r.set_text(
            api.TRITONSERVER_InferenceRequestAddRequestedOutput,
            "output name",
            output,
        )?;
    }
    Ok(buffers)
}

/// One request parameter, by its type.
fn set_parameter(
    r: &UnsubmittedRequest,
    key: &str,
    value: &ParameterValue,
) -> Result<(), EngineError> {
    let api = &r.triton().api;
    let key = to_cstring("parameter name", key)?;
    let r = r.as_ptr();
    // SAFETY (each arm): the request is live and ours; the key (and a string value) are
    // NUL-terminated locals that outlive the call, and Triton copies them.
    let status = match value {
        ParameterValue::String(s) => {
            let s = to_cstring("parameter value", s)?;
            // SAFETY: see above.
            unsafe {
                api.TRITONSERVER_InferenceRequestSetStringParameter(r, key.as_ptr(), s.as_ptr())
            }
        }
        // SAFETY: see above.
        ParameterValue::Int(i) => unsafe {
            api.TRITONSERVER_InferenceRequestSetIntParameter(r, key.as_ptr(), *i)
        },
        ParameterValue::UInt(u) => {
            let i = i64::try_from(*u).map_err(|_| {
                EngineError::new(
                    ErrorCode::InvalidArg,
                    format!(
                        "parameter '{}': {u} is past the largest integer",
                        key.to_string_lossy()
                    ),
                )
            })?;
            // SAFETY: see above.
            unsafe { api.TRITONSERVER_InferenceRequestSetIntParameter(r, key.as_ptr(), i) }
        }
        // SAFETY: see above.
        ParameterValue::Bool(b) => unsafe {
            api.TRITONSERVER_InferenceRequestSetBoolParameter(r, key.as_ptr(), *b)
        },
        // SAFETY: see above.
        ParameterValue::Double(d) => unsafe {
            api.TRITONSERVER_InferenceRequestSetDoubleParameter(r, key.as_ptr(), *d)
        },
    };
    check(api, status)
}

/// One input: its name, type and shape, and its data referenced in place (not copied).
fn add_input(r: &UnsubmittedRequest, input: &InputTensor) -> Result<(), EngineError> {
    let api = &r.triton().api;
    let name = to_cstring("input name", &input.name)?;
    // SAFETY: the request is live and ours; the name and the shape slice outlive the call and
    // Triton copies them.
    check(api, unsafe {
        api.TRITONSERVER_InferenceRequestAddInput(
            r.as_ptr(),
            name.as_ptr(),
            datatype_to_raw(input.datatype),
            input.shape.as_ptr(),
            input.shape.len() as u64,
        )
    })?;
    // SAFETY: as above; the data is referenced, not copied: the caller keeps its `Bytes` alive
    // until Triton releases the request.
    check(api, unsafe {
        api.TRITONSERVER_InferenceRequestAppendInputData(
            r.as_ptr(),
            name.as_ptr(),
            input.data.as_ptr().cast(),
            input.data.len(),
            ffi::TRITONSERVER_MEMORY_CPU,
            0,
        )
    })
}

/// Triton is done with the request: forget the pointer, delete it, free the inputs.
unsafe extern "C" fn release_request(
    request: *mut ffi::TRITONSERVER_InferenceRequest,
    flags: u32,
    userp: *mut c_void,
) {
    if flags & ffi::TRITONSERVER_REQUEST_RELEASE_ALL == 0 {
        return; // Rescheduled: Triton keeps the request and will release it again.
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `userp` is the RequestContext box leaked in `infer`, released exactly once
        // (the RELEASE_ALL call); taking the pointer under the lock means no cancel can be using
        // it while it is deleted.
        unsafe {
            let context = Box::from_raw(userp.cast::<RequestContext>());
            let triton = context.in_flight.triton;
            context.in_flight.lock().take();
            let status = triton.api.TRITONSERVER_InferenceRequestDelete(request);
            if let Err(e) = check(&triton.api, status) {
                tracing::warn!(error = %e, "deleting a released Triton request failed");
            }
            super::counters::request_released();
        }
    }));
    if outcome.is_err() {
        tracing::error!("panic while releasing a Triton request");
    }
}

/// One response (or only the final flag) from Triton: read it, delete it, send it to the stream.
unsafe extern "C" fn complete_response(
    response: *mut ffi::TRITONSERVER_InferenceResponse,
    flags: u32,
    userp: *mut c_void,
) {
    let context = userp.cast::<ResponseContext>();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if response.is_null() {
            return;
        }
        // SAFETY: `userp` is the ResponseContext box leaked in `infer`; it is freed only below,
        // on the final call, which Triton makes after every other call for this request. The
        // response is valid until we delete it, after reading.
        unsafe {
            let context = &*context;
            let api = &context.triton.api;
            let result = read_response(api, response, context.classification.as_ref());
            let status = api.TRITONSERVER_InferenceResponseDelete(response);
            if let Err(e) = check(api, status) {
                tracing::warn!(error = %e, "deleting a Triton response failed");
            }
            // The stream may have been dropped (client gone); the response is then discarded.
            let _ = context.sender.send(result);
        }
    }));
    if outcome.is_err() {
        tracing::error!("panic while reading a Triton response");
    }
    if flags & ffi::TRITONSERVER_RESPONSE_COMPLETE_FINAL != 0 {
        // SAFETY: the final call is the last use of the context; freeing it drops the sender,
        // which ends the stream.
        drop(unsafe { Box::from_raw(context) });
    }
}

/// The responses of one inference, in order. Implements `futures_core::Stream`.
pub struct ResponseStream {
    receiver: mpsc::UnboundedReceiver<ResponseResult>,
    in_flight: Arc<SubmittedRequest>,
    finished: bool,
}

impl ResponseStream {
    /// The next response, or `None` after the last.
    pub async fn next(&mut self) -> Option<ResponseResult> {
        let item = self.receiver.recv().await;
        self.finished |= item.is_none();
        item
    }

    /// The one response of a request to a non-decoupled model.
    pub async fn single(mut self) -> ResponseResult {
        self.next().await.unwrap_or_else(|| {
            Err(EngineError::new(
                ErrorCode::Internal,
                "the model completed the request without a response",
            ))
        })
    }

    /// Asks Triton to stop working on the request; responses already sent still arrive.
    pub fn cancel(&self) {
        let request = self.in_flight.lock();
        if let Some(request) = request.as_ref() {
            let api = &self.in_flight.triton.api;
            // SAFETY: the pointer is present only while Triton has not released the request,
            // and the release callback cannot delete it while we hold the lock. Cancelling only
            // marks the request; it does not call back synchronously.
            let status = unsafe { api.TRITONSERVER_InferenceRequestCancel(request.0) };
            if let Err(e) = check(api, status) {
                tracing::debug!(error = %e, "cancelling a Triton request failed");
            }
        }
    }

    /// Whether Triton still holds the request (it has not been released yet).
    pub fn in_flight(&self) -> bool {
        self.in_flight.lock().is_some()
    }
}

impl futures_core::Stream for ResponseStream {
    type Item = ResponseResult;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let poll = self.receiver.poll_recv(cx);
        if let Poll::Ready(None) = poll {
            self.finished = true;
        }
        poll
    }
}

impl Drop for ResponseStream {
    fn drop(&mut self) {
        // A closed channel means Triton already sent its final response: nothing to cancel.
        if !self.finished && !self.receiver.is_closed() {
            self.cancel();
        }
    }
}

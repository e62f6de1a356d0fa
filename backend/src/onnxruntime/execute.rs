//! One call of `TRITONBACKEND_ModelInstanceExecute` for an ONNX model: the requests the core's
//! batcher gathered are joined along the batch dimension into one run of the session, and each
//! request gets its rows of every output back. Every request is answered once (an error where
//! it failed, a panic included), its statistics reported, and released.

use std::borrow::Cow;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use ort::memory::Allocator;
use ort::session::{RunOptions, SessionOutputs};
use ort::value::{DynTensor, DynValue, Tensor, ValueType};

use crate::clock::now_ns;
use crate::dtype::{DataType, bytes_elements, push_bytes_element};
use crate::error::{BackendError, Code};
use crate::ffi;
use crate::request::{Input, Request};
use crate::response::{Output, Response};
use crate::statistics;

use super::OnnxInstance;
use super::config::TensorSpec;
use super::types;

/// A request read and checked, waiting for its run.
struct Pending<'r> {
    /// Its place in the execute's request list.
    index: usize,
    /// Its inputs, in the configuration's order (`None`: an optional input left out).
    inputs: Vec<Option<Input<'r>>>,
    /// The outputs it asked for (all the configuration's, where it named none).
    wanted: Vec<usize>,
    /// Its batch rows (1 without batching).
    rows: usize,
}

/// How one request went, for its statistics.
#[derive(Clone, Copy)]
struct Served {
    ok: bool,
    compute_start: u64,
    compute_end: u64,
}

/// Serves `requests` on `instance`, answering and releasing every one.
///
/// # Safety
/// `instance` and `requests` are what Triton passed to `TRITONBACKEND_ModelInstanceExecute`,
/// and `state` is that instance's state.
pub unsafe fn run(
    instance: *mut ffi::TRITONBACKEND_ModelInstance,
    state: &OnnxInstance,
    requests: &[*mut ffi::TRITONBACKEND_Request],
) {
    let exec_start = now_ns();
    // SAFETY: each pointer is a request Triton handed to this execute, adopted once here.
    let requests: Vec<Request> = requests
        .iter()
        .map(|r| unsafe { Request::adopt(*r) })
        .collect();
    let mut served = vec![
        Served {
            ok: false,
            compute_start: exec_start,
            compute_end: exec_start,
        };
        requests.len()
    ];
    let mut pending = Vec::new();
    for (index, request) in requests.iter().enumerate() {
        match read(state, index, request) {
            Ok(ready) => pending.push(ready),
            Err(error) => answer_error(request, error),
        }
    }
    for group in batches(state.config.max_batch_size, pending) {
        let compute_start = now_ns();
        let rows: usize = group.iter().map(|p| p.rows).sum();
        let mut answered = vec![None; group.len()];
        let ran = catch_unwind(AssertUnwindSafe(|| {
            serve(state, &requests, &group, &mut answered)
        }))
        .unwrap_or_else(|_| {
            Err(BackendError::internal(format!(
                "the onnxruntime backend failed on model {}",
                state.model
            )))
        });
        let compute_end = now_ns();
        for (member, answer) in group.iter().zip(&answered) {
            let ok = answer.unwrap_or_else(|| {
                let error = ran
                    .clone()
                    .err()
                    .unwrap_or_else(|| BackendError::internal("the request got no response"));
                answer_error(&requests[member.index], error);
                false
            });
            served[member.index] = Served {
                ok,
                compute_start,
                compute_end,
            };
        }
        // SAFETY: the instance is live for the whole execute.
        unsafe {
            statistics::batch(
                instance,
                rows as u64,
                exec_start,
                compute_start,
                compute_end,
            )
        };
    }
    for (request, served) in requests.iter().zip(&served) {
        // SAFETY: the instance and the request are live (requests are released below).
        unsafe {
            statistics::request(
                instance,
                request.raw(),
                served.ok,
                exec_start,
                served.compute_start,
                served.compute_end,
            )
        };
    }
    drop(requests);
}

/// Answers a request with `error` as its final response.
fn answer_error(request: &Request, error: BackendError) {
    // Nothing else can reach the client: Triton answers a request released without a final
    // response itself.
    let _ = Response::new(request).and_then(|response| response.send(true, Some(error)));
}

/// Reads a request's inputs in the configuration's order, and what it asks back.
fn read<'r>(
    state: &OnnxInstance,
    index: usize,
    request: &'r Request,
) -> Result<Pending<'r>, BackendError> {
    let config = &state.config;
    let mut given = request.inputs()?;
    let mut inputs = Vec::with_capacity(config.inputs.len());
    for spec in &config.inputs {
        let found = given.iter().position(|i| i.name == spec.name);
        let input = match found {
            Some(at) => given.swap_remove(at),
            None if spec.optional => {
                inputs.push(None);
                continue;
            }
            None => return Err(invalid(format!("the request has no input '{}'", spec.name))),
        };
        if input.dtype != spec.dtype {
            return Err(invalid(format!(
                "input '{}' is {}; model {} takes {}",
                spec.name,
                types::config_name(input.dtype),
                state.model,
                types::config_name(spec.dtype)
            )));
        }
        inputs.push(Some(input));
    }
    if let Some(extra) = given.first() {
        return Err(invalid(format!(
            "unexpected inference input '{}' for model {}",
            extra.name, state.model
        )));
    }
    let rows = if config.max_batch_size > 0 {
        let first = inputs.iter().flatten().next();
        let rows = first.and_then(|i| i.shape.first()).copied().unwrap_or(1);
        usize::try_from(rows).map_err(|_| invalid(format!("batch size {rows}")))?
    } else {
        1
    };
    let asked = request.requested_outputs()?;
    let wanted = if asked.is_empty() {
        (0..config.outputs.len()).collect()
    } else {
        asked
            .iter()
            .map(|name| {
                config
                    .outputs
                    .iter()
                    .position(|o| &o.name == name)
                    .ok_or_else(|| invalid(format!("model {} has no output '{name}'", state.model)))
            })
            .collect::<Result<_, _>>()?
    };
    Ok(Pending {
        index,
        inputs,
        wanted,
        rows,
    })
}

/// Splits the requests into runs: with batching, consecutive requests whose inputs agree in
/// everything but the batch dimension share a run of at most `max_batch_size` rows; without,
/// each request is its own run.
fn batches(max_batch_size: u64, pending: Vec<Pending<'_>>) -> Vec<Vec<Pending<'_>>> {
    let limit = usize::try_from(max_batch_size).unwrap_or(usize::MAX);
    let mut groups: Vec<Vec<Pending<'_>>> = Vec::new();
    for request in pending {
        let joins = limit > 0
            && groups.last().is_some_and(|group| {
                let rows: usize = group.iter().map(|p| p.rows).sum();
                rows + request.rows <= limit && same_rows(&group[0], &request)
            });
        match groups.last_mut() {
            Some(group) if joins => group.push(request),
            _ => groups.push(vec![request]),
        }
    }
    groups
}

/// Whether two requests' inputs have the same row shapes and the same inputs present.
fn same_rows(a: &Pending<'_>, b: &Pending<'_>) -> bool {
    a.inputs.iter().zip(&b.inputs).all(|(x, y)| match (x, y) {
        (Some(x), Some(y)) => x.shape.get(1..) == y.shape.get(1..),
        (None, None) => true,
        _ => false,
    })
}

/// Runs one group and answers each member, setting `answered[i]` (whether it succeeded) as each
/// response goes out.
/// An `Err` means the run failed; the caller answers those not yet answered.
fn serve(
    state: &OnnxInstance,
    requests: &[Request],
    group: &[Pending<'_>],
    answered: &mut [Option<bool>],
) -> Result<(), BackendError> {
    let config = &state.config;
    let batched = config.max_batch_size > 0;
    let rows: usize = group.iter().map(|p| p.rows).sum();
    if batched && rows as u64 > config.max_batch_size {
        return Err(invalid(format!(
            "batch size {rows} for model {}, max allowed is {}",
            state.model, config.max_batch_size
        )));
    }
    // A group runs for all its members; only a group whose every client left is skipped.
    if group.iter().all(|p| requests[p.index].is_cancelled()) {
        return Err(BackendError::new(
            Code::Cancelled,
            "the request was cancelled",
        ));
    }
    let mut feeds: Vec<(Cow<'_, str>, DynValue)> = Vec::with_capacity(config.inputs.len());
    for (slot, spec) in config.inputs.iter().enumerate() {
        let parts: Vec<&Input<'_>> = group
            .iter()
            .filter_map(|p| p.inputs[slot].as_ref())
            .collect();
        if parts.is_empty() {
            continue;
        }
        feeds.push((
            Cow::Borrowed(spec.name.as_str()),
            join(spec, &parts, rows, batched)?,
        ));
    }
    let mut session = state
        .session
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let options = Arc::new(
        RunOptions::new().map_err(|e| BackendError::internal(format!("run options: {e}")))?,
    );
    let watched: Vec<_> = group.iter().map(|p| requests[p.index].raw()).collect();
    let mut outputs = state
        .watch
        .during(&watched, &options, || {
            session.run_with_options(feeds, &*options)
        })
        .map_err(|e| run_error(&state.model, &e))?;
    let produced = take_outputs(state, &mut outputs, group)?;
    let mut first_row = 0;
    for (slot, member) in group.iter().enumerate() {
        let request = &requests[member.index];
        let answer = respond(state, request, &produced, member, first_row, rows, batched);
        first_row += member.rows;
        // Answered once, whatever the send says: a failed send leaves nothing to retry, and a
        // second final response would be one too many.
        answered[slot] = Some(answer.is_ok());
        let _ = match answer {
            Ok(response) => response.send(true, None),
            Err(error) => Response::new(request).and_then(|r| r.send(true, Some(error))),
        };
    }
    Ok(())
}

/// The session's input for one configured tensor: the group's rows joined in order.
fn join(
    spec: &TensorSpec,
    parts: &[&Input<'_>],
    rows: usize,
    batched: bool,
) -> Result<DynValue, BackendError> {
    let first = parts[0];
    let mut shape: Vec<i64> = if batched {
        let mut shape = vec![rows as i64];
        shape.extend_from_slice(first.shape.get(1..).unwrap_or(&[]));
        shape
    } else {
        first.shape.clone()
    };
    if let Some(reshape) = &spec.reshape {
        shape = reshaped(&spec.name, &shape, reshape, batched)?;
    }
    let elements = shape
        .iter()
        .try_fold(1usize, |n, d| {
            usize::try_from(*d).ok().and_then(|d| n.checked_mul(d))
        })
        .ok_or_else(|| invalid(format!("input '{}' has shape {shape:?}", spec.name)))?;
    if spec.dtype == DataType::Bytes {
        return strings(spec, parts, shape, elements);
    }
    let size = types::element_size(spec.dtype).unwrap_or(1);
    let total: usize = parts.iter().map(|p| p.data.len()).sum();
    if Some(total) != elements.checked_mul(size) {
        return Err(invalid(format!(
            "input '{}': shape {shape:?} of {} needs {} bytes, the request carries {total}",
            spec.name,
            types::config_name(spec.dtype),
            elements.saturating_mul(size)
        )));
    }
    let mut tensor = DynTensor::new(&Allocator::default(), types::to_onnx(spec.dtype), shape)
        .map_err(|e| BackendError::internal(format!("input '{}': {e}", spec.name)))?;
    let base = tensor.data_ptr_mut().cast::<u8>();
    let mut at = 0;
    for part in parts {
        // SAFETY: the tensor's buffer is `elements * size` == `total` bytes of CPU memory (the
        // default allocator's), checked above; the parts fill it exactly, each from a separate
        // request buffer that cannot overlap it.
        unsafe { std::ptr::copy_nonoverlapping(part.data.as_ptr(), base.add(at), part.data.len()) };
        at += part.data.len();
    }
    Ok(tensor.into_dyn())
}

/// A BYTES input as an ONNX string tensor: every element UTF-8 without NUL bytes.
fn strings(
    spec: &TensorSpec,
    parts: &[&Input<'_>],
    shape: Vec<i64>,
    elements: usize,
) -> Result<DynValue, BackendError> {
    let mut texts = Vec::with_capacity(elements);
    for part in parts {
        for element in bytes_elements(&part.data)? {
            let text = std::str::from_utf8(element)
                .ok()
                .filter(|t| !t.contains('\0'))
                .ok_or_else(|| {
                    invalid(format!(
                        "input '{}': element {} is not UTF-8 text without NUL bytes, which ONNX strings need",
                        spec.name,
                        texts.len()
                    ))
                })?;
            texts.push(text.to_owned());
        }
    }
    if texts.len() != elements {
        return Err(invalid(format!(
            "input '{}': shape {shape:?} needs {elements} strings, the request carries {}",
            spec.name,
            texts.len()
        )));
    }
    Tensor::from_string_array((shape, texts.as_slice()))
        .map(Tensor::into_dyn)
        .map_err(|e| BackendError::internal(format!("input '{}': {e}", spec.name)))
}

/// The shape the model sees for an input with `reshape`: the batch rows (if any) then the
/// reshape, its one `-1` (if any) inferred from the element count.
fn reshaped(
    name: &str,
    shape: &[i64],
    reshape: &[i64],
    batched: bool,
) -> Result<Vec<i64>, BackendError> {
    let elements: i64 = shape.iter().product();
    let mut out: Vec<i64> = Vec::with_capacity(reshape.len() + 1);
    if batched {
        out.push(shape[0]);
    }
    out.extend_from_slice(reshape);
    let known: i64 = out.iter().filter(|d| **d >= 0).product();
    if let Some(open) = out.iter().position(|d| *d < 0) {
        if known == 0 || elements % known != 0 {
            return Err(invalid(format!(
                "input '{name}' cannot take reshape {reshape:?}"
            )));
        }
        out[open] = elements / known;
    } else if known != elements {
        return Err(invalid(format!(
            "input '{name}' of shape {shape:?} cannot take reshape {reshape:?}"
        )));
    }
    Ok(out)
}

/// One output of a run, owned.
struct Produced {
    /// The output's place in the configuration.
    slot: usize,
    /// Its shape.
    shape: Vec<i64>,
    /// Its elements.
    data: ProducedData,
}

/// An output's elements: ONNX Runtime's buffer, or the strings of a string tensor.
enum ProducedData {
    /// A fixed-size type, in ONNX Runtime's CPU memory.
    Fixed(DynTensor),
    /// A string tensor's elements.
    Strings(Vec<String>),
}

/// Takes from the run every output some member asked for, checked against the configuration.
fn take_outputs(
    state: &OnnxInstance,
    outputs: &mut SessionOutputs<'_>,
    group: &[Pending<'_>],
) -> Result<Vec<Produced>, BackendError> {
    let mut slots: Vec<usize> = group
        .iter()
        .flat_map(|p| p.wanted.iter().copied())
        .collect();
    slots.sort_unstable();
    slots.dedup();
    slots
        .into_iter()
        .map(|slot| {
            let spec = &state.config.outputs[slot];
            let broken = |what: String| {
                BackendError::internal(format!(
                    "model {}: output '{}' {what}",
                    state.model, spec.name
                ))
            };
            let value = outputs
                .remove(spec.name.as_str())
                .ok_or_else(|| broken("was not produced".into()))?;
            let ValueType::Tensor { ty, shape, .. } = value.dtype().clone() else {
                return Err(broken("is not a tensor".into()));
            };
            if types::from_onnx(ty) != Some(spec.dtype) {
                return Err(broken(format!(
                    "holds {ty}; the configuration says {}",
                    types::config_name(spec.dtype)
                )));
            }
            let tensor = value
                .downcast::<ort::value::DynTensorValueType>()
                .map_err(|e| broken(e.to_string()))?;
            let data = if spec.dtype == DataType::Bytes {
                let (_, strings) = tensor
                    .try_extract_strings()
                    .map_err(|e| broken(e.to_string()))?;
                ProducedData::Strings(strings)
            } else {
                ProducedData::Fixed(tensor)
            };
            Ok(Produced {
                slot,
                shape: shape.to_vec(),
                data,
            })
        })
        .collect()
}

/// One request's response: its rows of every output it asked for.
fn respond(
    state: &OnnxInstance,
    request: &Request,
    produced: &[Produced],
    member: &Pending<'_>,
    first_row: usize,
    rows: usize,
    batched: bool,
) -> Result<Response, BackendError> {
    let mut response = Response::new(request)?;
    for &slot in &member.wanted {
        let Some(output) = produced.iter().find(|p| p.slot == slot) else {
            continue;
        };
        let spec = &state.config.outputs[slot];
        let elements: usize = output.shape.iter().map(|d| *d as usize).product();
        let (shape, range) = if batched {
            if output.shape.first().copied() != Some(rows as i64) {
                return Err(BackendError::internal(format!(
                    "model {}: output '{}' has shape {:?} for a batch of {rows}",
                    state.model, spec.name, output.shape
                )));
            }
            let per_row = elements / rows.max(1);
            let mut shape = vec![member.rows as i64];
            shape.extend_from_slice(&output.shape[1..]);
            (
                shape,
                first_row * per_row..(first_row + member.rows) * per_row,
            )
        } else {
            (output.shape.clone(), 0..elements)
        };
        let shape = configured_shape(spec, shape, batched);
        let data: Cow<'_, [u8]> = match &output.data {
            ProducedData::Strings(strings) => {
                let mut out = Vec::new();
                for text in &strings[range] {
                    push_bytes_element(&mut out, text.as_bytes());
                }
                Cow::Owned(out)
            }
            ProducedData::Fixed(tensor) => {
                let size = types::element_size(spec.dtype).unwrap_or(1);
                let base = tensor.data_ptr().cast::<u8>();
                if range.is_empty() || base.is_null() {
                    Cow::Borrowed(&[][..])
                } else {
                    // SAFETY: the tensor is a CPU tensor of `elements` elements of `size` bytes
                    // (its type was checked against the configuration's), alive for this
                    // borrow; `range` lies within it (rows checked above).
                    Cow::Borrowed(unsafe {
                        std::slice::from_raw_parts(base.add(range.start * size), range.len() * size)
                    })
                }
            }
        };
        response.add_output(&Output {
            name: spec.name.clone(),
            dtype: spec.dtype,
            shape,
            data,
        })?;
    }
    Ok(response)
}

/// An output's shape as the configuration declares it: where it reshapes the model's (a model
/// scalar per row served as `dims: [1]`), the configured dims with the batch rows.
fn configured_shape(spec: &TensorSpec, shape: Vec<i64>, batched: bool) -> Vec<i64> {
    if spec.reshape.is_none() || spec.dims.iter().any(|d| *d < 0) {
        return shape;
    }
    let mut configured = if batched { vec![shape[0]] } else { Vec::new() };
    configured.extend_from_slice(&spec.dims);
    let count = |s: &[i64]| s.iter().product::<i64>();
    if count(&configured) == count(&shape) {
        configured
    } else {
        shape
    }
}

/// A run error. The model loaded and the inputs passed the configuration's checks, so an
/// operator that refuses them (ONNX Runtime's INVALID_ARGUMENT, or FAIL: a shape the network
/// cannot take, say an image side its strides do not divide) is the request's error; anything
/// else (an exception, an execution provider's failure) is the server's.
fn run_error(model: &str, error: &ort::Error) -> BackendError {
    let code = match error.code() {
        ort::ErrorCode::InvalidArgument | ort::ErrorCode::GenericFailure => Code::InvalidArg,
        _ => Code::Internal,
    };
    BackendError::new(
        code,
        format!("ONNX Runtime failed to run model {model}: {error}"),
    )
}

/// An invalid-input error.
fn invalid(message: String) -> BackendError {
    BackendError::new(Code::InvalidArg, message)
}

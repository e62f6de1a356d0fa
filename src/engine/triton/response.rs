//! Reads a `TRITONSERVER_InferenceResponse` into an [`InferResponse`], taking each output's buffer
//! from the allocator instead of copying it.

use std::os::raw::c_void;

use bytes::Bytes;

use super::allocator::OutputBuffer;
use super::convert::datatype_from_raw;
use super::error::out_value;
use super::error::{check, copy_error, cstr_lossy};
use super::ffi;
use crate::engine::classification::classify;
use crate::engine::{EngineError, ErrorCode};
use crate::engine::{InferResponse, OutputTensor, ParameterValue};

/// The outputs a request asked for as classes, and whether the model's first dimension is
/// the batch (each batch entry is then classified apart).
pub(super) struct Classification {
    /// Output name and `k`.
    pub outputs: Vec<(String, u32)>,
    /// The model's `max_batch_size` is above 0.
    pub batched: bool,
}

/// Reads everything out of `response`. The response itself is not deleted here.
///
/// # Safety
/// `response` must be a valid response delivered to the response callback and not yet deleted,
/// whose output buffers were allocated by trident's allocator (or by Triton, in CPU memory).
pub(super) unsafe fn read_response(
    api: &ffi::TritonServerApi,
    response: *mut ffi::TRITONSERVER_InferenceResponse,
    classification: Option<&Classification>,
) -> Result<InferResponse, EngineError> {
    // SAFETY (every block below): `response` is valid per the caller; every out-pointer is a
    // local valid for writes; the strings and arrays Triton returns live as long as the response
    // and are copied before this function returns.
    // SAFETY: `response` is valid per the caller; the error returned, if any, stays owned by the
    // response and is only read below, never deleted.
    let error = unsafe { api.TRITONSERVER_InferenceResponseError(response) };
    if !error.is_null() {
        // Owned by the response: copy, do not delete.
        // SAFETY: see above; a non-null error is valid while the response is.
        return Err(unsafe { copy_error(api, error) });
    }
    let (mut model, mut version) = (std::ptr::null(), 0i64);
    // SAFETY: see above.
    check(api, unsafe {
        api.TRITONSERVER_InferenceResponseModel(response, &mut model, &mut version)
    })?;
    // SAFETY: see above.
    let model_name = unsafe { cstr_lossy(model) };
    // SAFETY: see above.
    let id = out_value(api, |id| unsafe {
        api.TRITONSERVER_InferenceResponseId(response, id)
    })?;
    // SAFETY: see above.
    let id = Some(unsafe { cstr_lossy(id) }).filter(|id| !id.is_empty());
    // SAFETY: see above.
    let parameters = unsafe { read_parameters(api, response) }?;
    // SAFETY: see above.
    let count = out_value(api, |count| unsafe {
        api.TRITONSERVER_InferenceResponseOutputCount(response, count)
    })?;
    let mut outputs = Vec::with_capacity(count as usize);
    for index in 0..count {
        // SAFETY: see above; `index` is below the output count.
        let output = unsafe { read_output(api, response, index) }?;
        let k = classification.and_then(|c| {
            c.outputs
                .iter()
                .find(|(name, _)| *name == output.name)
                .map(|&(_, k)| (k, c.batched))
        });
        outputs.push(match k {
            None => output,
            Some((k, batched)) => classify(&output, k, batched, |class| {
                // SAFETY: see above; `index` is below the output count.
                unsafe { class_label(api, response, index, class) }
            })?,
        });
    }
    Ok(InferResponse {
        model_name,
        model_version: version,
        id,
        parameters,
        outputs,
    })
}

/// The label of class `class` of output `index`, from the label file the model's configuration
/// gives it (none without one).
///
/// # Safety
/// As for [`read_response`]; `index` below the response's output count.
unsafe fn class_label(
    api: &ffi::TritonServerApi,
    response: *mut ffi::TRITONSERVER_InferenceResponse,
    index: u32,
    class: usize,
) -> Result<Option<String>, EngineError> {
    let mut label = std::ptr::null();
    // SAFETY: per the caller; `label` is a local valid for writes; the string Triton returns,
    // if any, lives as long as the response and is copied here.
    check(api, unsafe {
        api.TRITONSERVER_InferenceResponseOutputClassificationLabel(
            response, index, class, &mut label,
        )
    })?;
    // SAFETY: null, or a NUL-terminated string valid while the response is (see above).
    Ok((!label.is_null()).then(|| unsafe { cstr_lossy(label) }))
}

/// The response's parameters, each key once.
///
/// # Safety
/// As for [`read_response`].
unsafe fn read_parameters(
    api: &ffi::TritonServerApi,
    response: *mut ffi::TRITONSERVER_InferenceResponse,
) -> Result<Vec<(String, ParameterValue)>, EngineError> {
    // SAFETY: see `read_response`.
    let count = out_value(api, |count| unsafe {
        api.TRITONSERVER_InferenceResponseParameterCount(response, count)
    })?;
    let mut parameters = Vec::with_capacity(count as usize);
    for index in 0..count {
        let (mut name, mut kind, mut value) = (std::ptr::null(), 0, std::ptr::null());
        // SAFETY: see `read_response`; `index` is below the parameter count.
        check(api, unsafe {
            api.TRITONSERVER_InferenceResponseParameter(
                response, index, &mut name, &mut kind, &mut value,
            )
        })?;
        // SAFETY: Triton returned `value` for `kind`, and `name` as a C string; both live as
        // long as the response.
        if let Some(value) = unsafe { read_parameter(kind, value) } {
            // SAFETY: `name` is null or the NUL-terminated string Triton returned above, valid
            // while the response is; it is copied here.
            let name = unsafe { cstr_lossy(name) };
            let value = correlation_as_unsigned(&name, value);
            set_parameter(&mut parameters, name, value);
        }
    }
    Ok(parameters)
}

/// # Safety
/// `value` must point to a value of the type `kind` names, as Triton returns it.
unsafe fn read_parameter(
    kind: ffi::TRITONSERVER_ParameterType,
    value: *const c_void,
) -> Option<ParameterValue> {
    if value.is_null() {
        return None;
    }
    // SAFETY: Triton documents the pointee type for each parameter kind; guaranteed by caller.
    unsafe {
        match kind {
            ffi::TRITONSERVER_PARAMETER_STRING => {
                Some(ParameterValue::String(cstr_lossy(value.cast())))
            }
            ffi::TRITONSERVER_PARAMETER_INT => Some(ParameterValue::Int(*value.cast::<i64>())),
            ffi::TRITONSERVER_PARAMETER_BOOL => Some(ParameterValue::Bool(*value.cast::<bool>())),
            ffi::TRITONSERVER_PARAMETER_DOUBLE => {
                Some(ParameterValue::Double(*value.cast::<f64>()))
            }
            _ => None,
        }
    }
}

/// # Safety
/// As for [`read_response`]; `index` is below the response's output count.
unsafe fn read_output(
    api: &ffi::TritonServerApi,
    response: *mut ffi::TRITONSERVER_InferenceResponse,
    index: u32,
) -> Result<OutputTensor, EngineError> {
    let mut name = std::ptr::null();
    let mut datatype = ffi::TRITONSERVER_TYPE_INVALID;
    let (mut shape, mut dims) = (std::ptr::null(), 0u64);
    let (mut base, mut byte_size) = (std::ptr::null(), 0usize);
    let (mut memory_type, mut memory_type_id) = (ffi::TRITONSERVER_MEMORY_CPU, 0i64);
    let mut buffer_userp = std::ptr::null_mut();
    // SAFETY: see `read_response`.
    unsafe {
        check(
            api,
            api.TRITONSERVER_InferenceResponseOutput(
                response,
                index,
                &mut name,
                &mut datatype,
                &mut shape,
                &mut dims,
                &mut base,
                &mut byte_size,
                &mut memory_type,
                &mut memory_type_id,
                &mut buffer_userp,
            ),
        )?;
        let name = cstr_lossy(name);
        let datatype = datatype_from_raw(datatype).ok_or_else(|| {
            EngineError::new(
                ErrorCode::Unsupported,
                format!("output '{name}' has a datatype trident does not know ({datatype})"),
            )
        })?;
        if memory_type != ffi::TRITONSERVER_MEMORY_CPU
            && memory_type != ffi::TRITONSERVER_MEMORY_CPU_PINNED
        {
            return Err(EngineError::new(
                ErrorCode::Unsupported,
                format!("output '{name}' is in GPU memory, which trident does not read"),
            ));
        }
        let shape = if dims == 0 || shape.is_null() {
            Vec::new()
        } else {
            std::slice::from_raw_parts(shape, dims as usize).to_vec()
        };
        let data = take_output_bytes(base.cast(), byte_size, buffer_userp);
        Ok(OutputTensor {
            name,
            datatype,
            shape,
            data,
        })
    }
}

/// The output's bytes: moved out of trident's buffer when Triton wrote into one, else copied.
///
/// # Safety
/// `base` points to `byte_size` readable bytes (or `byte_size` is 0); `buffer_userp` is null or an
/// [`OutputBuffer`] made by trident's allocator and not yet released.
unsafe fn take_output_bytes(base: *const u8, byte_size: usize, buffer_userp: *mut c_void) -> Bytes {
    if byte_size == 0 {
        return Bytes::new();
    }
    if !buffer_userp.is_null() {
        // SAFETY: per the caller, a non-null user pointer is our live OutputBuffer; Triton has
        // finished writing it (the response is complete) and frees it only on release.
        let buffer = unsafe { &mut *buffer_userp.cast::<OutputBuffer>() };
        if buffer.data.as_ptr() == base && byte_size <= buffer.data.len() {
            let mut data = std::mem::take(&mut buffer.data);
            data.truncate(byte_size);
            return Bytes::from(data);
        }
    }
    // SAFETY: per the caller, `base` is readable for `byte_size` bytes.
    Bytes::copy_from_slice(unsafe { std::slice::from_raw_parts(base, byte_size) })
}

/// `value` of the parameter `name`, a `sequence_id` read as the unsigned correlation id it is:
/// Triton passes an ensemble step's correlation id on as an `INT` parameter, and a session's
/// (from 2^63 up) read as a signed one was echoed to its client as a negative number.
fn correlation_as_unsigned(name: &str, value: ParameterValue) -> ParameterValue {
    match value {
        ParameterValue::Int(id) if name == "sequence_id" && id < 0 => {
            ParameterValue::UInt(id.cast_unsigned())
        }
        value => value,
    }
}

/// Sets `key` in `parameters`, keeping each key once: a later value replaces an earlier one in
/// its place. An ensemble's response carries the parameters of its steps' responses merged as
/// they come (`sequence_id`, `sequence_start` and `sequence_end` once per step); a JSON object
/// may hold each key only once.
fn set_parameter(
    parameters: &mut Vec<(String, ParameterValue)>,
    key: String,
    value: ParameterValue,
) {
    match parameters.iter_mut().find(|(existing, _)| *existing == key) {
        Some((_, old)) => *old = value,
        None => parameters.push((key, value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sessions_correlation_id_reads_unsigned() {
        let session = (1u64 << 63) + 7;
        assert_eq!(
            correlation_as_unsigned("sequence_id", ParameterValue::Int(session.cast_signed())),
            ParameterValue::UInt(session)
        );
        assert_eq!(
            correlation_as_unsigned("sequence_id", ParameterValue::Int(5)),
            ParameterValue::Int(5)
        );
        assert_eq!(
            correlation_as_unsigned("other", ParameterValue::Int(-5)),
            ParameterValue::Int(-5)
        );
    }

    #[test]
    fn each_parameter_key_is_kept_once_with_its_last_value() {
        let mut parameters = Vec::new();
        for (key, value) in [
            ("sequence_id", 1),
            ("sequence_start", 0),
            ("sequence_id", 2),
        ] {
            set_parameter(&mut parameters, key.into(), ParameterValue::Int(value));
        }
        assert_eq!(
            parameters,
            [
                ("sequence_id".to_string(), ParameterValue::Int(2)),
                ("sequence_start".to_string(), ParameterValue::Int(0)),
            ]
        );
    }
}

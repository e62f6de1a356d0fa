//! Triton's numeric codes for the engine's plain types.

use super::ffi;
use crate::engine::DataType;

/// Triton's code for a data type.
pub(super) fn datatype_to_raw(dtype: DataType) -> ffi::TRITONSERVER_DataType {
    match dtype {
        DataType::Bool => ffi::TRITONSERVER_TYPE_BOOL,
        DataType::Uint8 => ffi::TRITONSERVER_TYPE_UINT8,
        DataType::Uint16 => ffi::TRITONSERVER_TYPE_UINT16,
        DataType::Uint32 => ffi::TRITONSERVER_TYPE_UINT32,
        DataType::Uint64 => ffi::TRITONSERVER_TYPE_UINT64,
        DataType::Int8 => ffi::TRITONSERVER_TYPE_INT8,
        DataType::Int16 => ffi::TRITONSERVER_TYPE_INT16,
        DataType::Int32 => ffi::TRITONSERVER_TYPE_INT32,
        DataType::Int64 => ffi::TRITONSERVER_TYPE_INT64,
        DataType::Fp16 => ffi::TRITONSERVER_TYPE_FP16,
        DataType::Fp32 => ffi::TRITONSERVER_TYPE_FP32,
        DataType::Fp64 => ffi::TRITONSERVER_TYPE_FP64,
        DataType::Bytes => ffi::TRITONSERVER_TYPE_BYTES,
        DataType::Bf16 => ffi::TRITONSERVER_TYPE_BF16,
    }
}

/// The data type for a Triton code; `None` for `INVALID` or a code newer than trident.
pub(super) fn datatype_from_raw(raw: ffi::TRITONSERVER_DataType) -> Option<DataType> {
    DataType::ALL
        .into_iter()
        .find(|&dtype| datatype_to_raw(dtype) == raw)
}

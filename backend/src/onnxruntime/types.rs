//! Element types across the three vocabularies that meet here: the model configuration's
//! (`TYPE_FP32`), Triton's tensors' ([`DataType`]) and ONNX Runtime's ([`TensorElementType`]).

use ort::value::TensorElementType;

use crate::dtype::DataType;

/// Every type both sides know, once: configuration name, Triton type, ONNX Runtime type.
const TYPES: [(&str, DataType, TensorElementType); 14] = [
    ("TYPE_BOOL", DataType::Bool, TensorElementType::Bool),
    ("TYPE_UINT8", DataType::U8, TensorElementType::Uint8),
    ("TYPE_UINT16", DataType::U16, TensorElementType::Uint16),
    ("TYPE_UINT32", DataType::U32, TensorElementType::Uint32),
    ("TYPE_UINT64", DataType::U64, TensorElementType::Uint64),
    ("TYPE_INT8", DataType::I8, TensorElementType::Int8),
    ("TYPE_INT16", DataType::I16, TensorElementType::Int16),
    ("TYPE_INT32", DataType::I32, TensorElementType::Int32),
    ("TYPE_INT64", DataType::I64, TensorElementType::Int64),
    ("TYPE_FP16", DataType::F16, TensorElementType::Float16),
    ("TYPE_FP32", DataType::F32, TensorElementType::Float32),
    ("TYPE_FP64", DataType::F64, TensorElementType::Float64),
    ("TYPE_STRING", DataType::Bytes, TensorElementType::String),
    ("TYPE_BF16", DataType::Bf16, TensorElementType::Bfloat16),
];

/// The Triton type a configuration's `data_type` names.
pub fn from_config(name: &str) -> Option<DataType> {
    TYPES.iter().find(|t| t.0 == name).map(|t| t.1)
}

/// The configuration's name for a Triton type.
pub fn config_name(dtype: DataType) -> &'static str {
    TYPES
        .iter()
        .find(|t| t.1 == dtype)
        .map_or("TYPE_INVALID", |t| t.0)
}

/// The Triton type an ONNX Runtime element type travels as, if Triton has one.
pub fn from_onnx(ty: TensorElementType) -> Option<DataType> {
    TYPES.iter().find(|t| t.2 == ty).map(|t| t.1)
}

/// ONNX Runtime's element type for a Triton type.
pub fn to_onnx(dtype: DataType) -> TensorElementType {
    TYPES
        .iter()
        .find(|t| t.1 == dtype)
        .map_or(TensorElementType::Undefined, |t| t.2)
}

/// Bytes one element of a fixed-size type takes; `None` for BYTES.
pub fn element_size(dtype: DataType) -> Option<usize> {
    Some(match dtype {
        DataType::Bool | DataType::U8 | DataType::I8 => 1,
        DataType::U16 | DataType::I16 | DataType::F16 | DataType::Bf16 => 2,
        DataType::U32 | DataType::I32 | DataType::F32 => 4,
        DataType::U64 | DataType::I64 | DataType::F64 => 8,
        DataType::Bytes => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_maps_both_ways() {
        for (name, dtype, ty) in TYPES {
            assert_eq!(from_config(name), Some(dtype));
            assert_eq!(config_name(dtype), name);
            assert_eq!(from_onnx(ty), Some(dtype));
            assert_eq!(to_onnx(dtype), ty);
            if let Some(size) = element_size(dtype) {
                assert_eq!(ty.byte_size(1), Some(size), "{name}");
            }
        }
        assert_eq!(from_config("TYPE_FP8"), None);
        assert_eq!(from_onnx(TensorElementType::Complex64), None);
    }
}

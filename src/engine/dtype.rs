//! Tensor data types as the KServe v2 protocol names them, with their element sizes.
//!
//! This is the one place that knows the names (`"INT32"`), and `engine::triton::convert` the one
//! place that knows Triton's numeric codes; tests check both against the real core.

use std::fmt;
use std::str::FromStr;

/// A tensor element type understood by Triton.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    /// Boolean, one byte per element (`TRITONSERVER_TYPE_BOOL`).
    Bool,
    /// Unsigned 8-bit integer (`TRITONSERVER_TYPE_UINT8`).
    Uint8,
    /// Unsigned 16-bit integer (`TRITONSERVER_TYPE_UINT16`).
    Uint16,
    /// Unsigned 32-bit integer (`TRITONSERVER_TYPE_UINT32`).
    Uint32,
    /// Unsigned 64-bit integer (`TRITONSERVER_TYPE_UINT64`).
    Uint64,
    /// Signed 8-bit integer (`TRITONSERVER_TYPE_INT8`).
    Int8,
    /// Signed 16-bit integer (`TRITONSERVER_TYPE_INT16`).
    Int16,
    /// Signed 32-bit integer (`TRITONSERVER_TYPE_INT32`).
    Int32,
    /// Signed 64-bit integer (`TRITONSERVER_TYPE_INT64`).
    Int64,
    /// IEEE 754 half-precision float, 2 bytes (`TRITONSERVER_TYPE_FP16`).
    Fp16,
    /// IEEE 754 single-precision float, 4 bytes (`TRITONSERVER_TYPE_FP32`).
    Fp32,
    /// IEEE 754 double-precision float, 8 bytes (`TRITONSERVER_TYPE_FP64`).
    Fp64,
    /// Variable-length byte strings, each serialized as a 4-byte little-endian length and the bytes.
    Bytes,
    /// bfloat16, the upper 16 bits of an FP32, 2 bytes (`TRITONSERVER_TYPE_BF16`).
    Bf16,
}

impl DataType {
    /// Every data type, in Triton's numbering order.
    pub const ALL: [DataType; 14] = [
        DataType::Bool,
        DataType::Uint8,
        DataType::Uint16,
        DataType::Uint32,
        DataType::Uint64,
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::Fp16,
        DataType::Fp32,
        DataType::Fp64,
        DataType::Bytes,
        DataType::Bf16,
    ];

    /// The protocol name, as in `"datatype": "INT32"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            DataType::Bool => "BOOL",
            DataType::Uint8 => "UINT8",
            DataType::Uint16 => "UINT16",
            DataType::Uint32 => "UINT32",
            DataType::Uint64 => "UINT64",
            DataType::Int8 => "INT8",
            DataType::Int16 => "INT16",
            DataType::Int32 => "INT32",
            DataType::Int64 => "INT64",
            DataType::Fp16 => "FP16",
            DataType::Fp32 => "FP32",
            DataType::Fp64 => "FP64",
            DataType::Bytes => "BYTES",
            DataType::Bf16 => "BF16",
        }
    }

    /// Bytes per element; `None` for `BYTES`, whose elements vary in size.
    pub const fn element_size(self) -> Option<usize> {
        match self {
            DataType::Bool | DataType::Uint8 | DataType::Int8 => Some(1),
            DataType::Uint16 | DataType::Int16 | DataType::Fp16 | DataType::Bf16 => Some(2),
            DataType::Uint32 | DataType::Int32 | DataType::Fp32 => Some(4),
            DataType::Uint64 | DataType::Int64 | DataType::Fp64 => Some(8),
            DataType::Bytes => None,
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A datatype name that Triton does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown datatype '{0}'")]
pub struct UnknownDataType(pub String);

impl FromStr for DataType {
    type Err = UnknownDataType;

    /// Parses the protocol name; case-sensitive, as Triton is.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        DataType::ALL
            .into_iter()
            .find(|dtype| dtype.as_str() == name)
            .ok_or_else(|| UnknownDataType(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for dtype in DataType::ALL {
            assert_eq!(dtype.as_str().parse::<DataType>(), Ok(dtype));
        }
    }

    #[test]
    fn unknown_and_miscased_names_are_refused() {
        for name in ["", "int32", "INT128", "FLOAT", "STRING"] {
            assert_eq!(name.parse::<DataType>(), Err(UnknownDataType(name.into())));
        }
    }
}

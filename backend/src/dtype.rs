//! Tensor element types as Triton numbers them, with the sizes and the encoding of BYTES.

use crate::error::BackendError;
use crate::ffi;

/// A tensor's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    /// `BOOL`, one byte per element.
    Bool,
    /// `UINT8`.
    U8,
    /// `UINT16`.
    U16,
    /// `UINT32`.
    U32,
    /// `UINT64`.
    U64,
    /// `INT8`.
    I8,
    /// `INT16`.
    I16,
    /// `INT32`.
    I32,
    /// `INT64`.
    I64,
    /// `FP16`.
    F16,
    /// `FP32`.
    F32,
    /// `FP64`.
    F64,
    /// `BYTES`: each element a 4-byte little-endian length and that many bytes.
    Bytes,
    /// `BF16`.
    Bf16,
}

impl DataType {
    /// The type Triton's number names.
    pub fn from_raw(raw: ffi::TRITONSERVER_DataType) -> Result<DataType, BackendError> {
        Ok(match raw {
            ffi::TRITONSERVER_TYPE_BOOL => DataType::Bool,
            ffi::TRITONSERVER_TYPE_UINT8 => DataType::U8,
            ffi::TRITONSERVER_TYPE_UINT16 => DataType::U16,
            ffi::TRITONSERVER_TYPE_UINT32 => DataType::U32,
            ffi::TRITONSERVER_TYPE_UINT64 => DataType::U64,
            ffi::TRITONSERVER_TYPE_INT8 => DataType::I8,
            ffi::TRITONSERVER_TYPE_INT16 => DataType::I16,
            ffi::TRITONSERVER_TYPE_INT32 => DataType::I32,
            ffi::TRITONSERVER_TYPE_INT64 => DataType::I64,
            ffi::TRITONSERVER_TYPE_FP16 => DataType::F16,
            ffi::TRITONSERVER_TYPE_FP32 => DataType::F32,
            ffi::TRITONSERVER_TYPE_FP64 => DataType::F64,
            ffi::TRITONSERVER_TYPE_BYTES => DataType::Bytes,
            ffi::TRITONSERVER_TYPE_BF16 => DataType::Bf16,
            other => {
                return Err(BackendError::invalid(format!(
                    "unknown tensor data type {other}"
                )));
            }
        })
    }

    /// Triton's number for the type.
    pub fn raw(self) -> ffi::TRITONSERVER_DataType {
        match self {
            DataType::Bool => ffi::TRITONSERVER_TYPE_BOOL,
            DataType::U8 => ffi::TRITONSERVER_TYPE_UINT8,
            DataType::U16 => ffi::TRITONSERVER_TYPE_UINT16,
            DataType::U32 => ffi::TRITONSERVER_TYPE_UINT32,
            DataType::U64 => ffi::TRITONSERVER_TYPE_UINT64,
            DataType::I8 => ffi::TRITONSERVER_TYPE_INT8,
            DataType::I16 => ffi::TRITONSERVER_TYPE_INT16,
            DataType::I32 => ffi::TRITONSERVER_TYPE_INT32,
            DataType::I64 => ffi::TRITONSERVER_TYPE_INT64,
            DataType::F16 => ffi::TRITONSERVER_TYPE_FP16,
            DataType::F32 => ffi::TRITONSERVER_TYPE_FP32,
            DataType::F64 => ffi::TRITONSERVER_TYPE_FP64,
            DataType::Bytes => ffi::TRITONSERVER_TYPE_BYTES,
            DataType::Bf16 => ffi::TRITONSERVER_TYPE_BF16,
        }
    }
}

/// The elements of a serialized BYTES tensor, in order; an error where a length runs past the end.
pub fn bytes_elements(mut data: &[u8]) -> Result<Vec<&[u8]>, BackendError> {
    let mut elements = Vec::new();
    while !data.is_empty() {
        let (length, rest) = data
            .split_first_chunk::<4>()
            .ok_or_else(|| BackendError::invalid("a BYTES element is cut inside its length"))?;
        let length = u32::from_le_bytes(*length) as usize;
        if rest.len() < length {
            return Err(BackendError::invalid(
                "a BYTES element is longer than the tensor's data",
            ));
        }
        let (element, rest) = rest.split_at(length);
        elements.push(element);
        data = rest;
    }
    Ok(elements)
}

/// Appends one BYTES element (its length, then its bytes) to `out`.
pub fn push_bytes_element(out: &mut Vec<u8>, element: &[u8]) {
    out.extend_from_slice(&(element.len() as u32).to_le_bytes());
    out.extend_from_slice(element);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_elements_round_trip_and_refuse_cut_data() {
        let mut data = Vec::new();
        push_bytes_element(&mut data, b"hello");
        push_bytes_element(&mut data, b"");
        push_bytes_element(&mut data, b"w");
        assert_eq!(
            bytes_elements(&data).unwrap(),
            vec![&b"hello"[..], &b""[..], &b"w"[..]]
        );
        assert!(bytes_elements(&data[..data.len() - 1]).is_err());
        assert!(bytes_elements(&data[..2]).is_err());
        assert!(bytes_elements(&[]).unwrap().is_empty());
    }

    #[test]
    fn every_type_round_trips_through_its_number() {
        for raw in 1..=14 {
            assert_eq!(DataType::from_raw(raw).unwrap().raw(), raw);
        }
        assert!(DataType::from_raw(0).is_err());
        assert!(DataType::from_raw(15).is_err());
    }
}

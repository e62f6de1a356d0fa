//! The one rule every input tensor passes before it reaches the core, whatever produced it (v2
//! JSON, the binary extension, generate, a request plugin's tensors or v2 body).
//!
//! A shape is refused when a dimension is negative, or when its non-zero dimensions multiply to
//! more than [`MAX_ELEMENTS`]. The second rule matters for shapes that hold no data: `[0, 2^63-1]`
//! has zero elements and zero bytes, yet a backend that allocates by shape (numpy in the python
//! backend's stub: "array is too big") fails on it, and the python backend's stub process died
//! of exactly that request, leaving its model unable to serve. No real tensor comes near the
//! bound: a request body is limited to megabytes (`--max-body-bytes`).
//!
//! Then the data must be what the shape says: `elements × element size` bytes, or for `BYTES`
//! exactly `elements` length-prefixed strings.

use super::request::{InferRequest, InputTensor};
use super::{EngineError, ErrorCode};

/// The most elements a shape may describe, counting only its non-zero dimensions: 2^40
/// (about 1.1 × 10^12; 4 TiB of FP32).
pub const MAX_ELEMENTS: u64 = 1 << 40;

/// The number of elements `shape` holds, after checking it against the rule above; the error
/// names the input and the shape.
pub fn element_count(name: &str, shape: &[i64]) -> Result<usize, String> {
    let invalid = |why: &str| format!("input '{name}' has an invalid shape {shape:?}: {why}");
    let mut elements: u64 = 1;
    let mut described: u64 = 1;
    for &dim in shape {
        let dim = u64::try_from(dim).map_err(|_| invalid("a dimension is negative"))?;
        elements = elements.saturating_mul(dim);
        if dim != 0 {
            described = described
                .checked_mul(dim)
                .filter(|&n| n <= MAX_ELEMENTS)
                .ok_or_else(|| {
                    invalid("its non-zero dimensions describe more than 2^40 elements")
                })?;
        }
    }
    // elements ≤ described ≤ 2^40, which fits a usize on every 64-bit target.
    usize::try_from(elements).map_err(|_| invalid("too many elements for this machine"))
}

/// A `BYTES` tensor's data is not a sequence of 4-byte little-endian lengths and strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MalformedBytes;

/// Iterates the elements of a `BYTES` tensor (each a 4-byte little-endian length and the
/// bytes); a malformed rest is one error, then the end.
pub fn bytes_elements(data: &[u8]) -> impl Iterator<Item = Result<&[u8], MalformedBytes>> {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            rest = &[];
            return Some(Err(MalformedBytes));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            rest = &[];
            return Some(Err(MalformedBytes));
        }
        let (element, tail) = tail.split_at(len);
        rest = tail;
        Some(Ok(element))
    })
}

impl InputTensor {
    /// Checks the shape and that the data is exactly what the shape says.
    pub fn check(&self) -> Result<(), EngineError> {
        let invalid = |message: String| EngineError::new(ErrorCode::InvalidArg, message);
        let elements = element_count(&self.name, &self.shape).map_err(invalid)?;
        let (name, shape) = (&self.name, &self.shape);
        match self.datatype.element_size() {
            Some(size) => {
                let expected = elements * size; // ≤ 2^40 × 8: no overflow
                if self.data.len() != expected {
                    return Err(invalid(format!(
                        "input '{name}' has shape {shape:?} ({elements} {} elements, {expected} \
                         bytes) but {} bytes of data",
                        self.datatype,
                        self.data.len()
                    )));
                }
            }
            None => {
                let mut count = 0usize;
                for element in bytes_elements(&self.data) {
                    element.map_err(|_| {
                        invalid(format!(
                            "input '{name}': the BYTES data is not a sequence of 4-byte lengths \
                             and strings"
                        ))
                    })?;
                    count += 1;
                }
                if count != elements {
                    return Err(invalid(format!(
                        "input '{name}' has shape {shape:?} ({elements} elements) but its BYTES \
                         data holds {count}"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The most parameters one request may set. Every key of a generate body that names no input
/// becomes one, and the core builds an object for each: a 6 MB body of 300,000 keys was
/// 300,000 of them. Requests in practice set a handful.
pub const MAX_REQUEST_PARAMETERS: usize = 1024;

impl InferRequest {
    /// Checks every input ([`InputTensor::check`]) and the number of parameters
    /// ([`MAX_REQUEST_PARAMETERS`]); the engine does this before submitting.
    pub fn check_inputs(&self) -> Result<(), EngineError> {
        if self.parameters.len() > MAX_REQUEST_PARAMETERS {
            return Err(EngineError::new(
                ErrorCode::InvalidArg,
                format!(
                    "the request sets {} parameters; at most {MAX_REQUEST_PARAMETERS} are taken",
                    self.parameters.len()
                ),
            ));
        }
        self.inputs.iter().try_for_each(InputTensor::check)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::DataType;

    #[test]
    fn shapes_within_the_rule_count_their_elements() {
        assert_eq!(element_count("x", &[]), Ok(1));
        assert_eq!(element_count("x", &[2, 3]), Ok(6));
        assert_eq!(element_count("x", &[0, 7]), Ok(0));
        assert_eq!(element_count("x", &[1 << 20, 1 << 20]), Ok(1 << 40));
        assert_eq!(element_count("x", &[0, 1 << 40]), Ok(0));
    }

    #[test]
    fn hostile_shapes_are_refused_naming_input_and_shape() {
        let huge = i64::MAX;
        for shape in [
            vec![-1],
            vec![2, -3],
            vec![0, huge],
            vec![huge, 0],
            vec![0, 1 << 41],
            vec![1 << 21, 1 << 20],
            vec![0, 1 << 30, 1 << 30],
            vec![4_294_967_296, 4_294_967_296, 4_294_967_296],
        ] {
            let message = element_count("INPUT0", &shape).unwrap_err();
            assert!(
                message.contains("input 'INPUT0' has an invalid shape")
                    && message.contains(&format!("{shape:?}")),
                "{shape:?}: {message}"
            );
        }
    }

    fn tensor(datatype: DataType, shape: &[i64], data: &[u8]) -> InputTensor {
        InputTensor {
            name: "A".into(),
            datatype,
            shape: shape.to_vec(),
            data: bytes::Bytes::copy_from_slice(data),
        }
    }

    #[test]
    fn data_must_be_what_the_shape_says() {
        assert!(tensor(DataType::Int32, &[2], &[0; 8]).check().is_ok());
        assert!(tensor(DataType::Int32, &[0, 5], &[]).check().is_ok());
        let short = tensor(DataType::Int32, &[2], &[0; 7]).check().unwrap_err();
        assert_eq!(short.code, ErrorCode::InvalidArg);
        assert!(
            short.message.contains("8 bytes) but 7 bytes"),
            "{}",
            short.message
        );
        let two = [1, 0, 0, 0, b'a', 0, 0, 0, 0];
        assert!(tensor(DataType::Bytes, &[2], &two).check().is_ok());
        assert!(tensor(DataType::Bytes, &[3], &two).check().is_err());
        assert!(
            tensor(DataType::Bytes, &[1], &[9, 0, 0, 0, b'a'])
                .check()
                .is_err()
        );
        let hostile = tensor(DataType::Fp32, &[0, i64::MAX], &[])
            .check()
            .unwrap_err();
        assert_eq!(hostile.code, ErrorCode::InvalidArg);
    }
}

//! Identity: every requested output `OUTPUT<x>` is the input `INPUT<x>`, same type, shape and
//! bytes (BYTES tensors included: their serialized form is copied as is). An output whose input
//! the request does not carry is left out: Triton lists every configured output as requested
//! when the client names none, and a model's inputs may be optional. A model may also
//! declare `BATCH_REQUESTS` (INT32, one per batch row): how many requests the dynamic batcher
//! merged into the execution that served this one.

use std::borrow::Cow;

use crate::dtype::DataType;
use crate::error::BackendError;
use crate::request::Input;
use crate::response::Output;

/// The output name that reports the execution's request count.
pub const BATCH_REQUESTS: &str = "BATCH_REQUESTS";

/// The outputs for one request: `requested` names them, `inputs` are the request's, and
/// `requests_in_execution` is how many requests the execution that carries this one holds.
pub fn outputs<'r>(
    requested: &[String],
    inputs: Vec<Input<'r>>,
    requests_in_execution: usize,
    batching: bool,
) -> Result<Vec<Output<'r>>, BackendError> {
    let mut inputs: Vec<Option<Input<'r>>> = inputs.into_iter().map(Some).collect();
    let batch = if batching {
        inputs
            .iter()
            .flatten()
            .find_map(|input| input.shape.first().copied())
            .unwrap_or(1)
            .max(0)
    } else {
        1
    };
    let mut outputs = Vec::with_capacity(requested.len());
    for name in requested {
        if name == BATCH_REQUESTS {
            let count = i32::try_from(requests_in_execution).unwrap_or(i32::MAX);
            let rows = usize::try_from(batch).unwrap_or(0);
            let data: Vec<u8> = std::iter::repeat_n(count.to_le_bytes(), rows)
                .flatten()
                .collect();
            let shape = if batching { vec![batch, 1] } else { vec![1] };
            outputs.push(Output {
                name: name.clone(),
                dtype: DataType::I32,
                shape,
                data: Cow::Owned(data),
            });
            continue;
        }
        let suffix = name.strip_prefix("OUTPUT").ok_or_else(|| {
            BackendError::invalid(format!(
                "identity: output {name} has no matching input (outputs are OUTPUT<x>, copied from INPUT<x>)"
            ))
        })?;
        let source = format!("INPUT{suffix}");
        let input = inputs
            .iter_mut()
            .find(|slot| slot.as_ref().is_some_and(|input| input.name == source))
            .and_then(Option::take);
        if let Some(input) = input {
            outputs.push(Output {
                name: name.clone(),
                dtype: input.dtype,
                shape: input.shape,
                data: input.data,
            });
        }
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(name: &str, dtype: DataType, shape: Vec<i64>, data: &'static [u8]) -> Input<'static> {
        Input {
            name: name.into(),
            dtype,
            shape,
            data: Cow::Borrowed(data),
        }
    }

    #[test]
    fn each_output_is_its_input_and_borrows_it() {
        let inputs = vec![
            input("INPUT_A", DataType::U8, vec![3], b"abc"),
            input("INPUT_B", DataType::Bytes, vec![1], b"\x01\0\0\0z"),
        ];
        let out = outputs(&["OUTPUT_B".into(), "OUTPUT_A".into()], inputs, 1, false).unwrap();
        assert_eq!(out[0].name, "OUTPUT_B");
        assert_eq!(out[0].dtype, DataType::Bytes);
        assert_eq!(&*out[0].data, b"\x01\0\0\0z");
        assert!(matches!(out[1].data, Cow::Borrowed(b"abc")));
        assert_eq!(out[1].shape, vec![3]);
    }

    #[test]
    fn an_output_without_its_input_is_left_out_and_a_stranger_refused() {
        let inputs = vec![input("INPUT0", DataType::F32, vec![1], &[0; 4])];
        let out = outputs(&["OUTPUT1".into(), "OUTPUT0".into()], inputs, 1, false).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].name, "OUTPUT0");
        let inputs = vec![input("INPUT0", DataType::F32, vec![1], &[0; 4])];
        assert!(outputs(&["LOGITS".into()], inputs, 1, false).is_err());
    }

    #[test]
    fn batch_requests_fills_one_row_per_batch_row() {
        let inputs = vec![input("INPUT0", DataType::U8, vec![2, 1], b"xy")];
        let out = outputs(&[BATCH_REQUESTS.into()], inputs, 3, true).unwrap();
        assert_eq!(out[0].shape, vec![2, 1]);
        assert_eq!(&*out[0].data, &[3, 0, 0, 0, 3, 0, 0, 0]);
    }
}

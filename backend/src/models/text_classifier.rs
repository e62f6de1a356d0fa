//! Text classifier: a stand-in for a BERT sequence classifier, with its tensors (inputs
//! `input_ids`, and optionally `attention_mask` and `token_type_ids`, INT64 or INT32, `[seq]`
//! per text; output `logits`, FP32, one score per class) and a cost of one pass over the ids.
//!
//! A text's logit for class `c` is the mean, over its tokens whose mask is 1, of
//! [`weight`]`(id, type, c)`: a fixed pseudo-random number in `[-1, 1]` for each token id,
//! segment and class. Every id counts, so a tokenizer that differs by one id changes the
//! answer, and a test can compute the logits from ids of its own.

use std::borrow::Cow;

use crate::dtype::DataType;
use crate::error::BackendError;
use crate::models::required;
use crate::request::Input;
use crate::response::Output;

/// Token `id` of segment `segment`'s weight for class `class`: SplitMix64's finalizer of
/// `id * 1000003 + segment * 7919 + class`, modulo 2001, less 1000, over 1000.
pub fn weight(id: i64, segment: i64, class: usize) -> f32 {
    let mut z = (id as u64)
        .wrapping_mul(1_000_003)
        .wrapping_add((segment as u64).wrapping_mul(7919))
        .wrapping_add(class as u64);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((z % 2001) as f32 - 1000.0) / 1000.0
}

/// The values of an INT64 or INT32 input of `rows` × `length`, checked against `ids`' shape.
fn integers(input: &Input<'_>, shape: &[i64]) -> Result<Vec<i64>, BackendError> {
    if input.shape != shape {
        return Err(BackendError::invalid(format!(
            "text_classifier: {} is shaped {:?}, and input_ids {shape:?}",
            input.name, input.shape
        )));
    }
    Ok(match input.dtype {
        DataType::I64 => {
            let (values, _) = input.data.as_chunks::<8>();
            values.iter().map(|v| i64::from_le_bytes(*v)).collect()
        }
        DataType::I32 => {
            let (values, _) = input.data.as_chunks::<4>();
            values
                .iter()
                .map(|v| i64::from(i32::from_le_bytes(*v)))
                .collect()
        }
        other => {
            return Err(BackendError::invalid(format!(
                "text_classifier: {} is {other:?}, not INT64 or INT32",
                input.name
            )));
        }
    })
}

/// The logits of every text of the request for `classes` classes; `batching`: the inputs'
/// first dimension is the batch.
pub fn outputs<'r>(
    requested: &[String],
    inputs: &[Input<'r>],
    classes: usize,
    batching: bool,
) -> Result<Vec<Output<'r>>, BackendError> {
    if let Some(other) = requested.iter().find(|name| *name != "logits") {
        return Err(BackendError::invalid(format!(
            "text_classifier has no output {other}: logits (the class scores)"
        )));
    }
    let ids_input = required(inputs, "input_ids")?;
    let shape = ids_input.shape.clone();
    let (rows, length) = match (batching, shape.as_slice()) {
        (true, [rows, length]) | (false, [rows @ 1, length]) => (*rows, *length),
        (false, [length]) => (1, *length),
        _ => (0, 0),
    };
    if rows <= 0 || length <= 0 {
        return Err(BackendError::invalid(format!(
            "text_classifier: input_ids is shaped {shape:?}, not {}[sequence]",
            if batching { "[batch] + " } else { "" }
        )));
    }
    let ids = integers(ids_input, &shape)?;
    let optional = |name: &str, default: i64| -> Result<Vec<i64>, BackendError> {
        match inputs.iter().find(|input| input.name == name) {
            Some(input) => integers(input, &shape),
            None => Ok(vec![default; ids.len()]),
        }
    };
    let mask = optional("attention_mask", 1)?;
    let segments = optional("token_type_ids", 0)?;
    let length = length as usize;
    let mut data = Vec::with_capacity(rows as usize * classes * 4);
    for row in 0..rows as usize {
        let tokens = row * length..(row + 1) * length;
        let counted: Vec<(i64, i64)> = tokens
            .filter(|t| mask[*t] == 1)
            .map(|t| (ids[t], segments[t]))
            .collect();
        for class in 0..classes {
            let sum: f32 = counted
                .iter()
                .map(|(id, segment)| weight(*id, *segment, class))
                .sum();
            let logit = if counted.is_empty() {
                0.0
            } else {
                sum / counted.len() as f32
            };
            data.extend_from_slice(&logit.to_le_bytes());
        }
    }
    let out_shape = if batching {
        vec![rows, classes as i64]
    } else {
        vec![classes as i64]
    };
    Ok(vec![Output {
        name: "logits".into(),
        dtype: DataType::F32,
        shape: out_shape,
        data: Cow::Owned(data),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_fixed_spread_and_inside_one() {
        let weights: Vec<f32> = (0..1000).map(|id| weight(id, 0, 1)).collect();
        assert!(weights.iter().all(|w| (-1.0..=1.0).contains(w)));
        assert!(weights.iter().any(|w| *w < -0.9) && weights.iter().any(|w| *w > 0.9));
        assert_ne!(weight(5, 0, 0), weight(5, 1, 0));
        assert_ne!(weight(5, 0, 0), weight(5, 0, 1));
        assert_eq!(weight(101, 0, 1), weight(101, 0, 1));
    }
}

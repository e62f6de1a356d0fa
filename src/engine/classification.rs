//! Triton's `classification` output parameter: an output's `k` largest elements as strings
//! `"<value>:<index>"`, or `"<value>:<index>:<label>"` when the model's configuration gives the
//! output a label file, in a `BYTES` tensor of shape `[k]` (`[batch, k]` for a model whose
//! first dimension is the batch), as Triton's HTTP frontend makes it and `tritonclient`'s
//! `class_count` asks for it. The labels come from the core (`triton::response`); this is the
//! arithmetic and the text.

use bytes::Bytes;

use super::{DataType, EngineError, ErrorCode, OutputTensor};

/// `output` as its top `k` classes per batch entry (each entry's elements when `batched`, else
/// the whole tensor), `label(index)` naming a class when the model has labels. Ties keep the
/// lower index first. More classes than elements gives one per element.
pub fn classify(
    output: &OutputTensor,
    k: u32,
    batched: bool,
    mut label: impl FnMut(usize) -> Result<Option<String>, EngineError>,
) -> Result<OutputTensor, EngineError> {
    let values = numbers(output)?;
    let batch = match output.shape.first() {
        Some(&rows) if batched && rows > 0 => usize::try_from(rows).unwrap_or(1),
        _ => 1,
    };
    let per_entry = values.len() / batch;
    let classes = usize::try_from(k).unwrap_or(usize::MAX).min(per_entry);
    let mut data = Vec::new();
    for entry in values.chunks(per_entry.max(1)).take(batch) {
        let mut order: Vec<usize> = (0..entry.len()).collect();
        order.sort_by(|&a, &b| {
            entry[b]
                .1
                .partial_cmp(&entry[a].1)
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for &index in order.iter().take(classes) {
            let mut text = format!("{}:{index}", entry[index].0);
            if let Some(label) = label(index)? {
                text.push(':');
                text.push_str(&label);
            }
            let length = u32::try_from(text.len()).unwrap_or(u32::MAX);
            data.extend_from_slice(&length.to_le_bytes());
            data.extend_from_slice(text.as_bytes());
        }
    }
    let classes = i64::try_from(classes).unwrap_or(i64::MAX);
    let shape = if batched && !output.shape.is_empty() {
        vec![output.shape[0], classes]
    } else {
        vec![classes]
    };
    Ok(OutputTensor {
        name: output.name.clone(),
        datatype: DataType::Bytes,
        shape,
        data: Bytes::from(data),
    })
}

/// Each element of `output` as Triton's frontend writes it (C++'s `std::to_string`: integers
/// as they are, floating point with six decimals) and as a number to order by.
fn numbers(output: &OutputTensor) -> Result<Vec<(String, f64)>, EngineError> {
    let bytes = &output.data;
    macro_rules! read {
        ($kind:ty, $size:expr, $text:expr) => {
            bytes
                .chunks_exact($size)
                .map(|chunk| {
                    let value = <$kind>::from_le_bytes(chunk.try_into().expect("chunk size"));
                    ($text(value), value as f64)
                })
                .collect()
        };
    }
    let integer = |value: i128| value.to_string();
    Ok(match output.datatype {
        DataType::Uint8 => read!(u8, 1, |v| integer(i128::from(v))),
        DataType::Uint16 => read!(u16, 2, |v| integer(i128::from(v))),
        DataType::Uint32 => read!(u32, 4, |v| integer(i128::from(v))),
        DataType::Uint64 => read!(u64, 8, |v| integer(i128::from(v))),
        DataType::Int8 => read!(i8, 1, |v| integer(i128::from(v))),
        DataType::Int16 => read!(i16, 2, |v| integer(i128::from(v))),
        DataType::Int32 => read!(i32, 4, |v| integer(i128::from(v))),
        DataType::Int64 => read!(i64, 8, |v| integer(i128::from(v))),
        DataType::Fp32 => read!(f32, 4, |v: f32| decimal(f64::from(v))),
        DataType::Fp64 => read!(f64, 8, decimal),
        other => {
            return Err(EngineError::new(
                ErrorCode::InvalidArg,
                format!(
                    "output '{}': class result not available for output due to unsupported \
                     type '{other}'",
                    output.name
                ),
            ));
        }
    })
}

/// `value` as C's `%f` writes it.
fn decimal(value: f64) -> String {
    if value.is_nan() {
        return if value.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        }
        .to_owned();
    }
    if value.is_infinite() {
        return if value < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    format!("{value:.6}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(datatype: DataType, shape: Vec<i64>, data: Vec<u8>) -> OutputTensor {
        OutputTensor {
            name: "OUT".into(),
            datatype,
            shape,
            data: Bytes::from(data),
        }
    }

    /// The length-prefixed strings of a BYTES tensor.
    fn strings(output: &OutputTensor) -> Vec<String> {
        let (mut rest, mut out) = (&output.data[..], Vec::new());
        while let [a, b, c, d, tail @ ..] = rest {
            let length = u32::from_le_bytes([*a, *b, *c, *d]) as usize;
            out.push(String::from_utf8(tail[..length].to_vec()).unwrap());
            rest = &tail[length..];
        }
        out
    }

    #[test]
    fn the_top_classes_are_triton_strings_with_labels() {
        let values: Vec<u8> = [0.1f32, 0.7, 0.2, 0.7]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let output = tensor(DataType::Fp32, vec![4], values);
        let labels = ["cat", "dog", "fish", "bird"];
        let top = classify(&output, 3, false, |i| Ok(Some(labels[i].to_owned()))).unwrap();
        assert_eq!(top.datatype, DataType::Bytes);
        assert_eq!(top.shape, [3]);
        // 0.7 as an f32 is written as C writes that float.
        assert_eq!(
            strings(&top),
            ["0.700000:1:dog", "0.700000:3:bird", "0.200000:2:fish"]
        );
        let unlabelled = classify(&output, 9, false, |_| Ok(None)).unwrap();
        assert_eq!(unlabelled.shape, [4]);
        assert_eq!(strings(&unlabelled)[3], "0.100000:0");
    }

    #[test]
    fn a_batched_output_is_classified_per_entry() {
        let values: Vec<u8> = [1i32, 5, 3, 9, 2, 4]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let output = tensor(DataType::Int32, vec![2, 3], values);
        let top = classify(&output, 1, true, |_| Ok(None)).unwrap();
        assert_eq!(top.shape, [2, 1]);
        assert_eq!(strings(&top), ["5:1", "9:0"]);
    }

    #[test]
    fn types_without_an_order_are_refused() {
        let output = tensor(DataType::Fp16, vec![1], vec![0, 0]);
        let error = classify(&output, 1, false, |_| Ok(None)).unwrap_err();
        assert!(
            error.message.contains("unsupported type 'FP16'"),
            "{}",
            error.message
        );
    }
}

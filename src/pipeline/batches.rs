//! A request adapter's batch past its model's `max_batch_size`, run as several requests.
//!
//! A plugin turns one body into many rows (64 texts, a folder's worth of images), while a
//! model takes at most `max_batch_size` rows a request and the core refuses more. trident splits
//! the adapted request by rows into requests the model takes, runs them together (the model's
//! scheduler batches and spreads them as it would separate clients'), and joins the answers
//! row after row, so that the response adapter sees one response, as if the model had taken
//! the whole batch. Only adapted requests are split: a v2 client sends what Triton takes, as
//! Triton answers it (docs/CONTRACT.md), and a stateful session's turn is one request of its
//! sequence. A request may make at most [`MAX_PARTS`] parts; the host's primitives refuse more
//! rows before decoding them ([`most_rows`]).
//!
//! Splitting shares the adapted tensors' bytes (fixed-size elements are sliced, `BYTES`
//! elements walked once); joining copies each output once, into a buffer the size of the
//! joined output.

use bytes::{Bytes, BytesMut};

use crate::engine::shape::bytes_elements;
use crate::engine::{InferRequest, InferResponse, InputTensor, OutputTensor};

/// The most requests one adapted request is split into.
pub const MAX_PARTS: usize = 64;

/// The most rows an adapted request may carry for a model taking `max_batch_size` rows a
/// request: [`MAX_PARTS`] requests' worth.
pub fn most_rows(max_batch_size: usize) -> usize {
    max_batch_size.saturating_mul(MAX_PARTS)
}

/// The rows of `request`: the first dimension every input shares, or `None` when an input has
/// none or they differ (the model then answers for itself).
pub fn rows(request: &InferRequest) -> Option<usize> {
    let mut rows = None;
    for input in &request.inputs {
        let first = usize::try_from(*input.shape.first()?).ok()?;
        match rows {
            None => rows = Some(first),
            Some(seen) if seen != first => return None,
            Some(_) => {}
        }
    }
    rows
}

/// `request` (of `rows` rows) as requests of at most `per_part` rows each, in order; an input
/// whose bytes do not hold its shape is an error naming it.
pub fn split(
    request: &InferRequest,
    rows: usize,
    per_part: usize,
) -> Result<Vec<InferRequest>, String> {
    let per_part = per_part.max(1);
    let parts = rows.div_ceil(per_part);
    if parts > MAX_PARTS {
        return Err(format!(
            "the request's {rows} rows would be {parts} requests of the model's \
             max_batch_size ({per_part}); at most {MAX_PARTS} are run for one request"
        ));
    }
    let mut inputs: Vec<Vec<InputTensor>> = vec![Vec::with_capacity(request.inputs.len()); parts];
    for input in &request.inputs {
        for (part, tensor) in split_input(input, rows, per_part)?.into_iter().enumerate() {
            inputs[part].push(tensor);
        }
    }
    Ok(inputs
        .into_iter()
        .map(|inputs| InferRequest {
            inputs,
            ..without_inputs(request)
        })
        .collect())
}

/// `input`'s rows in parts of `per_part`, sharing its bytes.
fn split_input(
    input: &InputTensor,
    rows: usize,
    per_part: usize,
) -> Result<Vec<InputTensor>, String> {
    let malformed = || {
        format!(
            "input '{}': its {} bytes do not hold a {:?} tensor of shape {:?}",
            input.name,
            input.data.len(),
            input.datatype,
            input.shape
        )
    };
    // Byte offsets of each part's first row, and the end.
    let mut bounds = Vec::with_capacity(rows.div_ceil(per_part) + 1);
    match input.datatype.element_size() {
        Some(size) => {
            let per_row = crate::engine::shape::element_count(&input.name, &input.shape[1..])?
                .checked_mul(size)
                .ok_or_else(malformed)?;
            if per_row.checked_mul(rows) != Some(input.data.len()) {
                return Err(malformed());
            }
            bounds.extend((0..rows).step_by(per_part).map(|row| row * per_row));
            bounds.push(input.data.len());
        }
        None => {
            // BYTES: each element a 4-byte length and its bytes, walked once; a bound at the
            // first element of each part.
            let per_row = crate::engine::shape::element_count(&input.name, &input.shape[1..])?;
            let total = per_row.checked_mul(rows).ok_or_else(malformed)?;
            let step = per_row.checked_mul(per_part).ok_or_else(malformed)?;
            let (mut offset, mut count) = (0usize, 0usize);
            for element in bytes_elements(&input.data) {
                let element = element.map_err(|_| malformed())?;
                if count % step == 0 {
                    bounds.push(offset);
                }
                offset += 4 + element.len();
                count += 1;
            }
            if count != total {
                return Err(malformed());
            }
            if step == 0 {
                // No elements in a row: every part is empty.
                bounds = vec![0; rows.div_ceil(per_part)];
            }
            bounds.push(input.data.len());
        }
    }
    Ok(bounds
        .windows(2)
        .enumerate()
        .map(|(part, window)| {
            let first = part * per_part;
            let mut shape = input.shape.clone();
            shape[0] = (rows - first).min(per_part) as i64;
            InputTensor {
                name: input.name.clone(),
                datatype: input.datatype,
                shape,
                data: input.data.slice(window[0]..window[1]),
            }
        })
        .collect())
}

/// The parts' responses as one, their outputs joined row after row; outputs whose other
/// dimensions or types differ between parts (a model answering each part in a shape of its
/// own) cannot be joined, an error naming the output.
pub fn join(mut responses: Vec<InferResponse>) -> Result<InferResponse, String> {
    if responses.len() == 1 {
        return Ok(responses.remove(0));
    }
    let Some(first) = responses.first() else {
        return Err("the model answered none of the request's parts".into());
    };
    let mut outputs = Vec::with_capacity(first.outputs.len());
    for output in &first.outputs {
        let parts: Vec<&OutputTensor> = responses
            .iter()
            .map(|response| {
                response.output(&output.name).ok_or_else(|| {
                    format!(
                        "output '{}' is missing from a part of the batch",
                        output.name
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        outputs.push(join_output(&parts)?);
    }
    let mut joined = responses.swap_remove(0);
    joined.outputs = outputs;
    Ok(joined)
}

/// One output's parts joined along its first dimension.
fn join_output(parts: &[&OutputTensor]) -> Result<OutputTensor, String> {
    let first = parts[0];
    let differ = |why: &str| {
        format!(
            "output '{}' cannot be joined across the batch's parts: {why}",
            first.name
        )
    };
    if first.shape.is_empty() {
        return Err(differ("it has no batch dimension"));
    }
    let mut rows: i64 = 0;
    let mut bytes = 0usize;
    for part in parts {
        if part.datatype != first.datatype {
            return Err(differ("its type differs"));
        }
        if part.shape.len() != first.shape.len() || part.shape[1..] != first.shape[1..] {
            return Err(differ(&format!(
                "its shapes differ ({:?} and {:?})",
                first.shape, part.shape
            )));
        }
        rows = rows.saturating_add(part.shape[0]);
        bytes = bytes.saturating_add(part.data.len());
    }
    let mut data = BytesMut::with_capacity(bytes);
    for part in parts {
        data.extend_from_slice(&part.data);
    }
    let mut shape = first.shape.clone();
    shape[0] = rows;
    Ok(OutputTensor {
        name: first.name.clone(),
        datatype: first.datatype,
        shape,
        data: Bytes::from(data),
    })
}

/// `request`'s every field but its inputs (which a part of it replaces).
fn without_inputs(request: &InferRequest) -> InferRequest {
    InferRequest {
        model_name: request.model_name.clone(),
        model_version: request.model_version,
        id: request.id.clone(),
        inputs: Vec::new(),
        requested_outputs: request.requested_outputs.clone(),
        classification: request.classification.clone(),
        parameters: request.parameters.clone(),
        timeout: request.timeout,
        priority: request.priority,
        sequence: request.sequence.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::DataType;

    fn fp32(name: &str, shape: &[i64]) -> InputTensor {
        let count: i64 = shape.iter().product();
        let data: Vec<u8> = (0..count).flat_map(|i| (i as f32).to_le_bytes()).collect();
        InputTensor {
            name: name.into(),
            datatype: DataType::Fp32,
            shape: shape.to_vec(),
            data: data.into(),
        }
    }

    fn strings(name: &str, rows: &[&[&str]]) -> InputTensor {
        let mut data = Vec::new();
        for element in rows.iter().flat_map(|row| row.iter()) {
            data.extend((element.len() as u32).to_le_bytes());
            data.extend(element.as_bytes());
        }
        InputTensor {
            name: name.into(),
            datatype: DataType::Bytes,
            shape: vec![rows.len() as i64, rows[0].len() as i64],
            data: data.into(),
        }
    }

    /// A response answering `part` as an echo of its inputs (as outputs of the same names).
    fn echo(part: &InferRequest) -> InferResponse {
        InferResponse {
            model_name: part.model_name.clone(),
            model_version: 1,
            id: part.id.clone(),
            parameters: Vec::new(),
            outputs: part
                .inputs
                .iter()
                .map(|input| OutputTensor {
                    name: input.name.clone(),
                    datatype: input.datatype,
                    shape: input.shape.clone(),
                    data: input.data.clone(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_batch_split_and_joined_is_the_batch() {
        let mut request = InferRequest::new("m");
        request.inputs = vec![
            fp32("a", &[10, 3]),
            strings(
                "s",
                &[
                    &["α", ""],
                    &["b", "cc"],
                    &["d", "e"],
                    &["ffff", "g"],
                    &["h", "i"],
                    &["j", "k"],
                    &["l", "m"],
                    &["n", "o"],
                    &["p", "q"],
                    &["r", "s"],
                ],
            ),
        ];
        request.requested_outputs = vec!["a".into()];
        assert_eq!(rows(&request), Some(10));
        for per_part in [1, 3, 4, 9, 10, 64] {
            let parts = split(&request, 10, per_part).unwrap();
            assert_eq!(parts.len(), 10usize.div_ceil(per_part));
            for (index, part) in parts.iter().enumerate() {
                let expected = (10 - index * per_part).min(per_part) as i64;
                assert_eq!(part.inputs[0].shape, vec![expected, 3]);
                assert_eq!(part.inputs[1].shape, vec![expected, 2]);
                assert_eq!(part.requested_outputs, vec!["a".to_string()]);
                part.check_inputs().unwrap();
            }
            let joined = join(parts.iter().map(echo).collect()).unwrap();
            assert_eq!(joined.outputs.len(), 2);
            for (output, input) in joined.outputs.iter().zip(&request.inputs) {
                assert_eq!(output.shape, input.shape);
                assert_eq!(output.data, input.data);
            }
        }
    }

    #[test]
    fn empty_rows_split_into_empty_parts() {
        let mut request = InferRequest::new("m");
        request.inputs = vec![fp32("a", &[5, 0])];
        let parts = split(&request, 5, 2).unwrap();
        assert_eq!(parts.len(), 3);
        assert!(parts.iter().all(|p| p.inputs[0].data.is_empty()));
        let empty = InputTensor {
            name: "s".into(),
            datatype: DataType::Bytes,
            shape: vec![5, 0],
            data: Bytes::new(),
        };
        request.inputs = vec![empty];
        assert_eq!(split(&request, 5, 2).unwrap().len(), 3);
    }

    #[test]
    fn inputs_that_do_not_hold_their_shape_are_named() {
        let mut request = InferRequest::new("m");
        let mut short = fp32("a", &[4, 2]);
        short.data = short.data.slice(..28);
        request.inputs = vec![short];
        let why = split(&request, 4, 2).unwrap_err();
        assert!(
            why.contains("input 'a'") && why.contains("28 bytes"),
            "{why}"
        );
        let mut broken = strings("s", &[&["a"], &["b"], &["c"]]);
        broken.data = broken.data.slice(..broken.data.len() - 1);
        request.inputs = vec![broken];
        assert!(split(&request, 3, 2).unwrap_err().contains("input 's'"));
        let extra = strings("s", &[&["a"], &["b"], &["c"]]);
        request.inputs = vec![InputTensor {
            shape: vec![2, 1],
            ..extra
        }];
        assert!(split(&request, 2, 1).unwrap_err().contains("input 's'"));
    }

    #[test]
    fn rows_are_the_first_dimension_all_inputs_share() {
        let mut request = InferRequest::new("m");
        request.inputs = vec![fp32("a", &[4, 2]), fp32("b", &[3, 2])];
        assert_eq!(rows(&request), None);
        request.inputs = vec![fp32("a", &[])];
        assert_eq!(rows(&request), None);
    }

    #[test]
    fn too_many_parts_are_refused_naming_the_batch_size() {
        let mut request = InferRequest::new("m");
        request.inputs = vec![fp32("a", &[65, 1])];
        let why = split(&request, 65, 1).unwrap_err();
        assert!(
            why.contains("65 rows") && why.contains("max_batch_size (1)"),
            "{why}"
        );
        assert_eq!(split(&request, 65, 2).unwrap().len(), 33);
        assert_eq!(most_rows(8), 512);
    }

    #[test]
    fn outputs_of_different_shapes_are_not_joined() {
        let mut request = InferRequest::new("m");
        request.inputs = vec![fp32("a", &[4, 2])];
        let parts = split(&request, 4, 2).unwrap();
        let mut responses: Vec<InferResponse> = parts.iter().map(echo).collect();
        responses[1].outputs[0].shape = vec![1, 4];
        let why = join(responses).unwrap_err();
        assert!(
            why.contains("output 'a'") && why.contains("shapes differ"),
            "{why}"
        );
        let mut responses: Vec<InferResponse> = parts.iter().map(echo).collect();
        responses[1].outputs.clear();
        assert!(join(responses).unwrap_err().contains("missing"));
    }
}

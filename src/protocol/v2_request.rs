//! Decodes a KServe v2 inference request, JSON or JSON plus binary tensor data, into an
//! [`InferRequest`]. The body is parsed once; binary tensor data is sliced from the body, not
//! copied, and JSON `data` is parsed straight into typed buffers.

use bytes::Bytes;
use serde_json::{Map, Value};

use super::ProtocolError;
use super::json_syntax::syntax_error;
use super::tensor_data::{DataError, decode_json_data};
use super::v2_envelope::{self, InputFields, OutputFields, TensorData};
use std::time::Duration;

use crate::engine::{DataType, InferRequest, InputTensor, ParameterValue, SequenceId};

/// How the response's outputs are to be encoded, as the request asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputEncoding {
    /// `parameters.binary_data_output`: every output binary unless it says otherwise.
    pub binary_by_default: bool,
    /// Per requested output, whether it is binary (its own `binary_data`, else JSON).
    pub per_output: Vec<(String, bool)>,
}

impl OutputEncoding {
    /// Whether output `name` goes in the binary section.
    pub fn is_binary(&self, name: &str) -> bool {
        self.per_output
            .iter()
            .find(|(n, _)| n == name)
            .map_or(self.binary_by_default, |&(_, binary)| binary)
    }

    /// Whether any output could be binary (decides the response layout).
    pub fn any_binary(&self) -> bool {
        self.binary_by_default || self.per_output.iter().any(|&(_, b)| b)
    }
}

/// Parameters that steer the frontend and are not passed to the model.
const FRONTEND_PARAMETERS: [&str; 2] = ["binary_data_output", "binary_data_size"];

/// Decodes an inference request for `model_name` from `body`, whose first `json_len` bytes
/// (all of it when `None`) are the JSON header.
pub fn decode_infer_request(
    model_name: &str,
    body: &Bytes,
    json_len: Option<usize>,
) -> Result<(InferRequest, OutputEncoding), ProtocolError> {
    let json_len = json_len.unwrap_or(body.len());
    let json_bytes = &body[..json_len];
    let json = v2_envelope::read(json_bytes)?;
    let mut request = InferRequest::new(model_name);
    request.id = json.id.filter(|id| !id.is_empty());
    let mut encoding = OutputEncoding::default();
    if let Some(parameters) = parameters(json_bytes, json.parameters)? {
        apply_parameters(&mut request, &mut encoding, parameters)?;
    }
    let mut binary = BinaryData {
        body,
        offset: json_len,
    };
    for input in json.inputs {
        request
            .inputs
            .push(decode_input(json_bytes, input, &mut binary)?);
    }
    if binary.offset != body.len() {
        return Err(bad(format!(
            "{} bytes of binary data follow the inputs that declare binary_data_size",
            body.len() - binary.offset
        )));
    }
    for output in json.outputs {
        // A listed output is JSON unless it asks for binary itself, whatever the default says.
        let (binary, classes) = output_parameters(json_bytes, &output)?;
        encoding.per_output.push((output.name.clone(), binary));
        if let Some(k) = classes {
            request.classification.push((output.name.clone(), k));
        }
        request.requested_outputs.push(output.name);
    }
    Ok((request, encoding))
}

/// The request's parameters: the ones with a meaning of their own (sequence, priority, timeout,
/// the output default) are applied, `triton_` keys refused, the rest passed to the model.
fn apply_parameters(
    request: &mut InferRequest,
    encoding: &mut OutputEncoding,
    parameters: Map<String, Value>,
) -> Result<(), ProtocolError> {
    for (key, value) in parameters {
        match key.as_str() {
            "binary_data_output" => encoding.binary_by_default = expect_bool(&key, &value)?,
            "sequence_id" => request.sequence.id = Some(sequence_id(&value)?),
            "sequence_start" => request.sequence.start = expect_bool(&key, &value)?,
            "sequence_end" => request.sequence.end = expect_bool(&key, &value)?,
            "priority" => request.priority = Some(expect_u64(&key, &value)?),
            "timeout" => request.timeout = Some(Duration::from_micros(expect_u64(&key, &value)?)),
            reserved if reserved.starts_with("triton_") => {
                return Err(bad(
                    "parameter keys starting with 'triton_' are reserved for \
                     Triton usage and should not be specified."
                        .into(),
                ));
            }
            frontend if FRONTEND_PARAMETERS.contains(&frontend) => {}
            _ => {
                let value = parameter_value(&key, value)?;
                request.parameters.push((key, value));
            }
        }
    }
    Ok(())
}

/// The binary part of a body, read in order by the inputs that declare `binary_data_size`.
struct BinaryData<'b> {
    body: &'b Bytes,
    /// Where the next input's bytes start.
    offset: usize,
}

impl BinaryData<'_> {
    /// The next `size` bytes, shared with the body (no copy).
    fn take(&mut self, name: &str, size: usize) -> Result<Bytes, ProtocolError> {
        let end = self
            .offset
            .checked_add(size)
            .filter(|&end| end <= self.body.len())
            .ok_or_else(|| {
                bad(format!(
                    "input '{name}' declares binary_data_size {size} but only {} bytes of \
                     binary data remain",
                    self.body.len() - self.offset
                ))
            })?;
        let data = self.body.slice(self.offset..end);
        self.offset = end;
        Ok(data)
    }
}

/// One input: its data from JSON or from the binary part, checked against its shape.
fn decode_input(
    json: &[u8],
    input: InputFields,
    binary: &mut BinaryData,
) -> Result<InputTensor, ProtocolError> {
    let datatype: DataType = input
        .datatype
        .parse()
        .map_err(|e| bad(format!("input '{}': {e}", input.name)))?;
    let elements = element_count(&input.name, &input.shape)?;
    let input_parameters = parameters(json, input.parameters)?;
    let binary_size = binary_data_size(&input.name, input_parameters.as_ref())?;
    let data = match (binary_size, input.data) {
        (Some(_), Some(_)) => {
            return Err(bad(format!(
                "input '{}' has both 'data' and 'binary_data_size'",
                input.name
            )));
        }
        (None, None) => {
            return Err(bad(format!(
                "input '{}' has neither 'data' nor 'binary_data_size'",
                input.name
            )));
        }
        (Some(size), None) => {
            let data = binary.take(&input.name, size)?;
            check_binary_size(&input.name, datatype, &input.shape, elements, &data)?;
            data
        }
        (None, Some(data)) => {
            let (data, count) = match data {
                TensorData::Decoded(data, count) => (data, count),
                TensorData::Text(raw) => decode_json_data(raw, datatype)
                    .map_err(|e| bad(e.message(&input.name, offset_in(json, raw))))?,
            };
            if count != elements {
                return Err(bad(format!(
                    "input '{}' has shape {:?}, {elements} elements, but its data has {count}",
                    input.name, input.shape
                )));
            }
            Bytes::from(data)
        }
    };
    Ok(InputTensor {
        name: input.name,
        datatype,
        shape: input.shape,
        data,
    })
}

/// Whether a requested output asks for binary data, and for how many classes (Triton's
/// `classification`: its top `k` elements as strings, [`crate::engine::classification`]; 0 is
/// none, as in Triton).
fn output_parameters(
    json: &[u8],
    output: &OutputFields,
) -> Result<(bool, Option<u32>), ProtocolError> {
    let (mut binary, mut classes) = (false, None);
    for (key, value) in parameters(json, output.parameters)?.iter().flatten() {
        match key.as_str() {
            "binary_data" => binary = expect_bool(key, value)?,
            "classification" => {
                let k = expect_u64(key, value)?;
                classes = (k > 0).then(|| u32::try_from(k).unwrap_or(u32::MAX));
            }
            _ => {}
        }
    }
    Ok((binary, classes))
}

/// A binary input must hold exactly what its shape says: `elements` × the element size, or for
/// `BYTES` exactly `elements` length-prefixed strings. Refused here with the numbers, rather
/// than by the core later.
fn check_binary_size(
    name: &str,
    datatype: DataType,
    shape: &[i64],
    elements: usize,
    data: &[u8],
) -> Result<(), ProtocolError> {
    match datatype.element_size() {
        Some(size) => {
            let expected = elements.checked_mul(size);
            if expected != Some(data.len()) {
                return Err(bad(format!(
                    "input '{name}' has shape {shape:?} ({elements} {} elements, {} bytes) but \
                     binary_data_size {}",
                    datatype.as_str(),
                    expected.map_or_else(|| "too many".to_owned(), |e| e.to_string()),
                    data.len()
                )));
            }
        }
        None => {
            let mut count = 0usize;
            for element in crate::protocol::tensor_data::bytes_elements(data) {
                if element.is_err() {
                    return Err(bad(format!(
                        "input '{name}': the BYTES data is not a sequence of 4-byte lengths and \
                         strings"
                    )));
                }
                count += 1;
            }
            if count != elements {
                return Err(bad(format!(
                    "input '{name}' has shape {shape:?} ({elements} elements) but its BYTES data \
                     holds {count}"
                )));
            }
        }
    }
    Ok(())
}

/// Where `part` (a slice of `json`) starts in it.
fn offset_in(json: &[u8], part: &str) -> usize {
    (part.as_ptr() as usize).saturating_sub(json.as_ptr() as usize)
}

/// A `parameters` object of the request (`raw`, within `json`): refused in Triton's words when
/// RapidJSON refuses it, else read.
fn parameters(json: &[u8], raw: Option<&str>) -> Result<Option<Map<String, Value>>, ProtocolError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    if let Some(error) = syntax_error(raw.as_bytes()) {
        return Err(bad(
            DataError::Syntax(error).message("parameters", offset_in(json, raw))
        ));
    }
    serde_json::from_str(raw)
        .map(Some)
        .map_err(|e| bad(format!("'parameters' must be a JSON object: {e}")))
}

/// The element count a shape implies, by the engine's one rule for shapes
/// ([`crate::engine::shape`]): negative dimensions and oversized shapes are refused.
pub fn element_count(name: &str, shape: &[i64]) -> Result<usize, ProtocolError> {
    crate::engine::shape::element_count(name, shape).map_err(bad)
}

fn binary_data_size(
    name: &str,
    parameters: Option<&Map<String, Value>>,
) -> Result<Option<usize>, ProtocolError> {
    let Some(value) = parameters.and_then(|p| p.get("binary_data_size")) else {
        return Ok(None);
    };
    value
        .as_u64()
        .and_then(|size| usize::try_from(size).ok())
        .map(Some)
        .ok_or_else(|| {
            bad(format!(
                "input '{name}': binary_data_size must be a non-negative integer, got {value}"
            ))
        })
}

fn expect_u64(key: &str, value: &Value) -> Result<u64, ProtocolError> {
    value.as_u64().ok_or_else(|| {
        bad(format!(
            "Unable to parse '{key}': expected an unsigned integer, got {value}"
        ))
    })
}

fn sequence_id(value: &Value) -> Result<SequenceId, ProtocolError> {
    match value {
        Value::String(s) => Ok(SequenceId::String(s.clone())),
        other => other.as_u64().map(SequenceId::Number).ok_or_else(|| {
            bad(format!("Unable to parse 'sequence_id': expected an unsigned integer or a string, got {other}"))
        }),
    }
}

fn expect_bool(key: &str, value: &Value) -> Result<bool, ProtocolError> {
    value
        .as_bool()
        .ok_or_else(|| bad(format!("parameter '{key}' must be a boolean, got {value}")))
}

/// A request parameter as Triton takes it: string, integer, boolean or double.
pub fn parameter_value(key: &str, value: Value) -> Result<ParameterValue, ProtocolError> {
    match value {
        Value::String(s) => Ok(ParameterValue::String(s)),
        Value::Bool(b) => Ok(ParameterValue::Bool(b)),
        Value::Number(n) => n
            .as_i64()
            .map(ParameterValue::Int)
            .or_else(|| n.as_f64().map(ParameterValue::Double))
            .ok_or_else(|| bad(format!("parameter '{key}' is out of range"))),
        other => Err(bad(format!(
            "parameter '{key}' must be a string, number or boolean, got {other}"
        ))),
    }
}

fn bad(message: String) -> ProtocolError {
    ProtocolError::BadRequest(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(
        body: &[u8],
        json_len: Option<usize>,
    ) -> Result<(InferRequest, OutputEncoding), ProtocolError> {
        decode_infer_request("m", &Bytes::copy_from_slice(body), json_len)
    }

    #[test]
    fn json_request_with_nested_data() {
        let body = br#"{"id":"7","inputs":[{"name":"A","datatype":"INT32","shape":[2,2],"data":[[1,2],[3,4]]}],
            "outputs":[{"name":"B"}],"parameters":{"priority":1,"tag":"x"}}"#;
        let (request, encoding) = decode(body, None).unwrap();
        assert_eq!(request.model_name, "m");
        assert_eq!(request.id.as_deref(), Some("7"));
        assert_eq!(request.inputs[0].shape, [2, 2]);
        assert_eq!(request.inputs[0].data.len(), 16);
        assert_eq!(request.requested_outputs, ["B"]);
        assert_eq!(request.priority, Some(1));
        assert_eq!(
            request.parameters,
            [("tag".to_string(), ParameterValue::String("x".into()))]
        );
        assert!(!encoding.any_binary());
    }

    #[test]
    fn binary_inputs_are_slices_of_the_body() {
        let json = br#"{"inputs":[{"name":"A","datatype":"UINT8","shape":[3],"parameters":{"binary_data_size":3}},
            {"name":"B","datatype":"UINT8","shape":[1],"parameters":{"binary_data_size":1}}],
            "outputs":[{"name":"C","parameters":{"binary_data":true}}]}"#;
        let mut body = json.to_vec();
        body.extend([1, 2, 3, 9]);
        let body = Bytes::from(body);
        let (request, encoding) = decode_infer_request("m", &body, Some(json.len())).unwrap();
        assert_eq!(&request.inputs[0].data[..], [1, 2, 3]);
        assert_eq!(&request.inputs[1].data[..], [9]);
        // Zero-copy: the input points into the body.
        assert_eq!(request.inputs[0].data.as_ptr(), body[json.len()..].as_ptr());
        assert!(encoding.is_binary("C"));
        assert!(!encoding.is_binary("D"));
    }

    #[test]
    fn sequence_and_timeout_parameters_steer_the_request() {
        let body = br#"{"inputs":[],"parameters":{"sequence_id":"s1","sequence_start":true,"timeout":1500}}"#;
        let (request, _) = decode(body, None).unwrap();
        assert_eq!(request.sequence.id, Some(SequenceId::String("s1".into())));
        assert!(request.sequence.start && !request.sequence.end);
        assert_eq!(request.timeout, Some(Duration::from_micros(1500)));
        assert!(request.parameters.is_empty());
    }

    #[test]
    fn listed_outputs_are_json_unless_they_ask() {
        let body =
            br#"{"inputs":[],"parameters":{"binary_data_output":true},"outputs":[{"name":"A"}]}"#;
        let (_, encoding) = decode(body, None).unwrap();
        assert!(!encoding.is_binary("A"));
        assert!(encoding.is_binary("unlisted"));
    }

    #[test]
    fn binary_output_by_default_with_per_output_override() {
        let body = br#"{"inputs":[],"parameters":{"binary_data_output":true},
            "outputs":[{"name":"X","parameters":{"binary_data":false}}]}"#;
        let (request, encoding) = decode(body, None).unwrap();
        assert!(request.parameters.is_empty());
        assert!(!encoding.is_binary("X"));
        assert!(encoding.is_binary("Y"));
    }

    /// Bodies RapidJSON refuses get Triton 2.51's answers, word for word, wherever serde
    /// stumbles first (its types, `[1,2`) or takes what RapidJSON refuses (`0e400`).
    #[test]
    fn rapidjsons_refusals_are_tritons_answers() {
        let at = |message: &str, offset: usize| {
            format!("failed to parse the request JSON buffer: {message} at {offset}")
        };
        let too_big = "Number too big to be stored in double.";
        let one = |data: &str, shape: &str| {
            format!(
                r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":{shape},"data":{data}}}]}}"#
            )
        };
        for (body, expected) in [
            ("[1,2".to_owned(), at("Missing a comma or ']' after an array element.", 4)),
            (one("[1e309]", "[1,1]"), at(too_big, 68)),
            (one("[0e400]", "[1,1]"), at(too_big, 68)),
            (one("[1]", "[1,0e400]"), at(too_big, 57)),
            (
                r#"{"parameters":{"x":0e400},"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[1]}]}"#.to_owned(),
                at(too_big, 19),
            ),
        ] {
            match decode(body.as_bytes(), None) {
                Err(ProtocolError::BadRequest(message)) => assert_eq!(message, expected, "{body}"),
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn classification_asks_for_an_outputs_top_classes() {
        let body = br#"{"inputs":[],"outputs":[{"name":"A","parameters":{"classification":3}},{"name":"B","parameters":{"classification":0}}]}"#;
        let (request, _) = decode(body, None).unwrap();
        assert_eq!(request.requested_outputs, ["A", "B"]);
        assert_eq!(request.classification, [("A".to_owned(), 3)]);
    }

    #[test]
    fn malformed_requests_are_bad_requests() {
        let cases: &[(&[u8], Option<usize>, &str)] = &[
            (b"{", None, "failed to parse the request JSON"),
            (b"[]", None, "failed to parse"),
            (br#"{"inputs":[{"name":"A","datatype":"INT33","shape":[1],"data":[1]}]}"#, None, "unknown datatype"),
            (br#"{"inputs":[{"name":"A","datatype":"INT32","shape":[2],"data":[1]}]}"#, None, "2 elements, but its data has 1"),
            (br#"{"inputs":[{"name":"A","datatype":"INT32","shape":[-1],"data":[1]}]}"#, None, "invalid shape"),
            (br#"{"inputs":[{"name":"A","datatype":"INT32","shape":[4294967296,4294967296,4294967296],"data":[1]}]}"#, None, "invalid shape"),
            (br#"{"inputs":[{"name":"A","datatype":"INT32","shape":[1]}]}"#, None, "neither"),
            (br#"{"inputs":[{"name":"A","datatype":"INT32","shape":[1],"data":[1],"parameters":{"binary_data_size":4}}]}"#, None, "both"),
            (br#"{"inputs":[{"name":"A","datatype":"INT32","shape":[1],"parameters":{"binary_data_size":4}}]}"#, None, "only 0 bytes"),
            (br#"{"inputs":[{"name":"A","datatype":"INT32","shape":[1],"parameters":{"binary_data_size":-4}}]}"#, None, "non-negative"),
            (br#"{"inputs":[],"outputs":[{"name":"A","parameters":{"classification":-3}}]}"#, None, "classification"),
            (br#"{"inputs":[],"outputs":[{"name":"A","parameters":{"classification":"3"}}]}"#, None, "classification"),
            (br#"{"inputs":[],"parameters":{"binary_data_output":1}}"#, None, "must be a boolean"),
            (br#"{"inputs":[],"parameters":{"p":[1]}}"#, None, "must be a string, number or boolean"),
            (br#"{"inputs":[],"parameters":{"triton_x":1}}"#, None, "reserved for Triton"),
            (br#"{"inputs":[],"parameters":{"priority":-1}}"#, None, "Unable to parse 'priority'"),
            (b"{\"inputs\":[]}xyz", Some(13), "3 bytes of binary data follow"),
        ];
        for (body, json_len, expected) in cases {
            match decode(body, *json_len) {
                Err(ProtocolError::BadRequest(message)) => {
                    assert!(
                        message.contains(expected),
                        "{}: {message}",
                        String::from_utf8_lossy(body)
                    )
                }
                other => panic!("{}: {other:?}", String::from_utf8_lossy(body)),
            }
        }
    }
}

//! Encodes an [`InferResponse`] as KServe v2 JSON, with binary outputs appended after the JSON
//! header when the request asked for them. Binary output data is not copied: the body is a list
//! of parts, the JSON header followed by each output's own buffer.

use bytes::Bytes;

use super::ProtocolError;
use super::binary_header::binary_content_type;
use super::tensor_data::{write_json_data, write_json_string};
use super::v2_request::OutputEncoding;
use crate::engine::{InferResponse, ParameterValue};

/// A response body as parts to send in order, with its content type.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedBody {
    /// `application/json`, or with binary outputs the binary type with the JSON header's
    /// length in `json-header-size`.
    pub content_type: String,
    /// The JSON, then each binary output's data in output order (empty ones left out).
    pub parts: Vec<Bytes>,
}

impl EncodedBody {
    /// A JSON body in one part.
    pub fn json(body: Vec<u8>) -> EncodedBody {
        EncodedBody {
            content_type: "application/json".into(),
            parts: vec![Bytes::from(body)],
        }
    }
}

/// Encodes one inference response.
pub fn encode_infer_response(
    response: &InferResponse,
    encoding: &OutputEncoding,
) -> Result<EncodedBody, ProtocolError> {
    let estimate: usize = response.outputs.iter().map(|o| 64 + o.data.len() * 3).sum();
    let mut json = Vec::with_capacity(128 + estimate);
    let mut binary = Vec::new();
    json.push(b'{');
    if let Some(id) = &response.id {
        json.extend_from_slice(b"\"id\":");
        write_json_string(&mut json, id);
        json.push(b',');
    }
    json.extend_from_slice(b"\"model_name\":");
    write_json_string(&mut json, &response.model_name);
    json.extend_from_slice(b",\"model_version\":\"");
    json.extend_from_slice(
        itoa::Buffer::new()
            .format(response.model_version)
            .as_bytes(),
    );
    json.push(b'"');
    if !response.parameters.is_empty() {
        json.extend_from_slice(b",\"parameters\":");
        write_parameters(&mut json, &response.parameters);
    }
    json.extend_from_slice(b",\"outputs\":[");
    for (index, output) in response.outputs.iter().enumerate() {
        if index > 0 {
            json.push(b',');
        }
        json.extend_from_slice(b"{\"name\":");
        write_json_string(&mut json, &output.name);
        json.extend_from_slice(b",\"datatype\":\"");
        json.extend_from_slice(output.datatype.as_str().as_bytes());
        json.extend_from_slice(b"\",\"shape\":");
        write_shape(&mut json, &output.shape);
        if encoding.is_binary(&output.name) {
            json.extend_from_slice(b",\"parameters\":{\"binary_data_size\":");
            json.extend_from_slice(itoa::Buffer::new().format(output.data.len()).as_bytes());
            json.push(b'}');
            binary.push(output.data.clone());
        } else {
            json.extend_from_slice(b",\"data\":");
            write_json_data(&mut json, output.datatype, &output.data)?;
        }
        json.push(b'}');
    }
    json.extend_from_slice(b"]}");

    if binary.is_empty() {
        return Ok(EncodedBody::json(json));
    }
    let content_type = binary_content_type(json.len());
    let mut parts = Vec::with_capacity(1 + binary.len());
    parts.push(Bytes::from(json));
    parts.extend(binary.into_iter().filter(|part| !part.is_empty()));
    Ok(EncodedBody {
        content_type,
        parts,
    })
}

fn write_shape(out: &mut Vec<u8>, shape: &[i64]) {
    out.push(b'[');
    let mut buffer = itoa::Buffer::new();
    for (index, dim) in shape.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(buffer.format(*dim).as_bytes());
    }
    out.push(b']');
}

/// Appends one parameter value as JSON.
pub fn write_parameter_value(out: &mut Vec<u8>, value: &ParameterValue) {
    match value {
        ParameterValue::String(s) => write_json_string(out, s),
        ParameterValue::Int(i) => out.extend_from_slice(itoa::Buffer::new().format(*i).as_bytes()),
        ParameterValue::UInt(u) => out.extend_from_slice(itoa::Buffer::new().format(*u).as_bytes()),
        ParameterValue::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        ParameterValue::Double(d) => {
            serde_json::to_writer(&mut *out, d).expect("writing to a Vec cannot fail")
        }
    }
}

/// Appends parameters as a JSON object.
pub fn write_parameters(out: &mut Vec<u8>, parameters: &[(String, ParameterValue)]) {
    out.push(b'{');
    for (index, (key, value)) in parameters.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_json_string(out, key);
        out.push(b':');
        write_parameter_value(out, value);
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{DataType, OutputTensor};
    use crate::protocol::binary_header::json_header_size;

    fn response() -> InferResponse {
        InferResponse {
            model_name: "add_sub".into(),
            model_version: 1,
            id: Some("r1".into()),
            parameters: vec![],
            outputs: vec![
                OutputTensor {
                    name: "OUTPUT0".into(),
                    datatype: DataType::Int32,
                    shape: vec![1, 2],
                    data: Bytes::from_static(&[1, 0, 0, 0, 255, 255, 255, 255]),
                },
                OutputTensor {
                    name: "OUTPUT1".into(),
                    datatype: DataType::Bytes,
                    shape: vec![1],
                    data: Bytes::from_static(&[2, 0, 0, 0, b'h', b'i']),
                },
            ],
        }
    }

    #[test]
    fn json_response_layout() {
        let body = encode_infer_response(&response(), &OutputEncoding::default()).unwrap();
        assert_eq!(body.content_type, "application/json");
        let text = String::from_utf8(body.parts.concat()).unwrap();
        assert_eq!(
            text,
            r#"{"id":"r1","model_name":"add_sub","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,2],"data":[1,-1]},{"name":"OUTPUT1","datatype":"BYTES","shape":[1],"data":["hi"]}]}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["outputs"][0]["data"][1], -1);
    }

    #[test]
    fn binary_outputs_follow_the_json_header() {
        let encoding = OutputEncoding {
            binary_by_default: false,
            per_output: vec![("OUTPUT0".into(), true)],
        };
        let response = response();
        let body = encode_infer_response(&response, &encoding).unwrap();
        let all = body.parts.concat();
        let json_len = json_header_size(Some(body.content_type.as_bytes()), all.len())
            .unwrap()
            .unwrap();
        let header: serde_json::Value = serde_json::from_slice(&all[..json_len]).unwrap();
        assert_eq!(header["outputs"][0]["parameters"]["binary_data_size"], 8);
        assert!(header["outputs"][0].get("data").is_none());
        assert_eq!(header["outputs"][1]["data"][0], "hi");
        assert_eq!(&all[json_len..], &response.outputs[0].data[..]);
        // The binary part is the output's own buffer, not a copy.
        assert_eq!(body.parts[1].as_ptr(), response.outputs[0].data.as_ptr());
    }

    #[test]
    fn parameters_are_written_as_an_object() {
        let mut response = response();
        response.parameters = vec![
            ("s".into(), ParameterValue::String("v".into())),
            ("i".into(), ParameterValue::Int(-3)),
            ("b".into(), ParameterValue::Bool(true)),
            ("d".into(), ParameterValue::Double(0.5)),
        ];
        let body = encode_infer_response(&response, &OutputEncoding::default()).unwrap();
        let parsed: serde_json::Value = serde_json::from_slice(&body.parts.concat()).unwrap();
        assert_eq!(
            parsed["parameters"],
            serde_json::json!({"s":"v","i":-3,"b":true,"d":0.5})
        );
    }
}

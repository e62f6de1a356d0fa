//! Properties of the KServe v2 codec (no Triton needed): what trident encodes, as JSON `data` or
//! as binary outputs, it decodes to the same tensor bytes; shapes and byte sizes that disagree
//! are always refused, and no declared size or offset makes the decoder read out of bounds; the
//! RapidJSON-faithful scanner behind Triton's parse-error wording takes every document serde takes.

use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{Value, json};
use trident::engine::{DataType, InferResponse, OutputTensor};
use trident::protocol::json_syntax::syntax_error;
use trident::protocol::v2_request::{OutputEncoding, decode_infer_request};
use trident::protocol::v2_response::encode_infer_response;

/// JSON documents of every kind of value, nested, as serde writes them.
fn json_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z\u{e9}\u{1F600}\\\"\n\t ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-z]{1,4}", inner), 0..4)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
    .prop_map(|value| value.to_string())
}

/// A shape with at most 24 elements (one dimension may be 0).
fn shape() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(0i64..=4, 1..=3).prop_filter("small", |s| s.iter().product::<i64>() <= 24)
}

/// Element bytes for `dtype`: booleans are 0 or 1; floats are finite (NaN payloads are not kept
/// by any JSON codec).
fn element(dtype: DataType) -> BoxedStrategy<Vec<u8>> {
    match dtype {
        DataType::Bool => prop::bool::ANY.prop_map(|b| vec![u8::from(b)]).boxed(),
        DataType::Fp16 => any::<u16>()
            .prop_filter("finite", |b| half::f16::from_bits(*b).is_finite())
            .prop_map(|b| b.to_le_bytes().to_vec())
            .boxed(),
        DataType::Bf16 => any::<u16>()
            .prop_filter("finite", |b| half::bf16::from_bits(*b).is_finite())
            .prop_map(|b| b.to_le_bytes().to_vec())
            .boxed(),
        DataType::Fp32 => any::<u32>()
            .prop_filter("finite", |b| f32::from_bits(*b).is_finite())
            .prop_map(|b| b.to_le_bytes().to_vec())
            .boxed(),
        DataType::Fp64 => any::<u64>()
            .prop_filter("finite", |b| f64::from_bits(*b).is_finite())
            .prop_map(|b| b.to_le_bytes().to_vec())
            .boxed(),
        other => {
            let size = other.element_size().expect("fixed size");
            prop::collection::vec(any::<u8>(), size).boxed()
        }
    }
}

/// A fixed-size tensor: dtype, shape and exactly that many elements.
fn fixed_tensor() -> impl Strategy<Value = (DataType, Vec<i64>, Vec<u8>)> {
    let fixed: Vec<DataType> = DataType::ALL
        .into_iter()
        .filter(|d| d.element_size().is_some())
        .collect();
    (prop::sample::select(fixed), shape()).prop_flat_map(|(dtype, shape)| {
        let count = shape.iter().product::<i64>() as usize;
        prop::collection::vec(element(dtype), count)
            .prop_map(move |elements| (dtype, shape.clone(), elements.concat()))
    })
}

/// A BYTES tensor: each element 4-byte length-prefixed UTF-8 (JSON carries strings).
fn bytes_tensor() -> impl Strategy<Value = (DataType, Vec<i64>, Vec<u8>)> {
    shape().prop_flat_map(|shape| {
        let count = shape.iter().product::<i64>() as usize;
        prop::collection::vec(".{0,6}", count).prop_map(move |strings| {
            let mut data = Vec::new();
            for s in &strings {
                data.extend_from_slice(&(s.len() as u32).to_le_bytes());
                data.extend_from_slice(s.as_bytes());
            }
            (DataType::Bytes, shape.clone(), data)
        })
    })
}

fn response(dtype: DataType, shape: &[i64], data: &[u8]) -> InferResponse {
    InferResponse {
        model_name: "m".into(),
        model_version: 1,
        id: None,
        parameters: Vec::new(),
        outputs: vec![OutputTensor {
            name: "T".into(),
            datatype: dtype,
            shape: shape.to_vec(),
            data: Bytes::copy_from_slice(data),
        }],
    }
}

/// Encodes the tensor as a JSON response, turns the output into an input and decodes it.
fn json_round_trip(dtype: DataType, shape: &[i64], data: &[u8]) -> Vec<u8> {
    let encoded = encode_infer_response(&response(dtype, shape, data), &OutputEncoding::default())
        .expect("encode");
    let body: Vec<u8> = encoded.parts.concat();
    let json: Value = serde_json::from_slice(&body).expect("trident writes valid JSON");
    let output = &json["outputs"][0];
    let request = json!({"inputs": [{"name": "T", "datatype": output["datatype"],
                                     "shape": output["shape"], "data": output["data"]}]});
    let request = Bytes::from(request.to_string());
    let (decoded, _) = decode_infer_request("m", &request, None).expect("decode what we encoded");
    decoded.inputs[0].data.to_vec()
}

/// Encodes the tensor as a binary output and sends that part back as a binary input.
fn binary_round_trip(dtype: DataType, shape: &[i64], data: &[u8]) -> Vec<u8> {
    let encoding = OutputEncoding {
        binary_by_default: true,
        per_output: Vec::new(),
    };
    let encoded = encode_infer_response(&response(dtype, shape, data), &encoding).expect("encode");
    let header_len: usize = encoded
        .content_type
        .rsplit('=')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("binary responses name their header size");
    let json: Value = serde_json::from_slice(&encoded.parts[0][..header_len]).expect("header");
    let size = json["outputs"][0]["parameters"]["binary_data_size"].clone();
    let header = json!({"inputs": [{"name": "T", "datatype": dtype.as_str(), "shape": shape,
                                    "parameters": {"binary_data_size": size}}]})
    .to_string();
    let mut body = header.clone().into_bytes();
    for part in &encoded.parts[1..] {
        body.extend_from_slice(part);
    }
    let (decoded, _) = decode_infer_request("m", &Bytes::from(body), Some(header.len()))
        .expect("decode what we encoded");
    decoded.inputs[0].data.to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn json_data_round_trips((dtype, shape, data) in prop_oneof![fixed_tensor(), bytes_tensor()]) {
        prop_assert_eq!(json_round_trip(dtype, &shape, &data), data);
    }

    #[test]
    fn binary_data_round_trips((dtype, shape, data) in prop_oneof![fixed_tensor(), bytes_tensor()]) {
        prop_assert_eq!(binary_round_trip(dtype, &shape, &data), data);
    }

    #[test]
    fn json_element_counts_that_disagree_are_refused(
        (dtype, shape, data) in fixed_tensor(),
        extra in 1usize..4,
        drop in any::<bool>(),
    ) {
        let count = shape.iter().product::<i64>() as usize;
        prop_assume!(!(drop && count == 0));
        let values: Vec<Value> = json_values(dtype, &data);
        let values: Vec<Value> = if drop {
            values[..count - 1].to_vec()
        } else {
            values.iter().cloned().chain(std::iter::repeat_n(values.first().cloned().unwrap_or(json!(0)), extra)).collect()
        };
        let request = json!({"inputs": [{"name": "T", "datatype": dtype.as_str(), "shape": shape, "data": values}]});
        let decoded = decode_infer_request("m", &Bytes::from(request.to_string()), None);
        prop_assert!(decoded.is_err(), "{} elements for shape {:?} were accepted", values.len(), shape);
    }

    #[test]
    fn binary_sizes_that_disagree_are_refused(
        (dtype, shape, data) in fixed_tensor(),
        declared in 0usize..512,
        trailing in 0usize..64,
    ) {
        prop_assume!(declared != data.len());
        let header = json!({"inputs": [{"name": "T", "datatype": dtype.as_str(), "shape": shape,
                                        "parameters": {"binary_data_size": declared}}]}).to_string();
        let mut body = header.clone().into_bytes();
        body.extend_from_slice(&data);
        body.extend(std::iter::repeat_n(7u8, trailing));
        // Declared sizes beyond the body, or sizes that do not match the shape, are errors; none
        // may panic or read past the body.
        let decoded = decode_infer_request("m", &Bytes::from(body), Some(header.len()));
        prop_assert!(decoded.is_err(), "binary_data_size {} for {} bytes was accepted", declared, data.len());
    }

    /// Triton's wording for a body that is not JSON: every document serde takes, the
    /// RapidJSON-faithful scanner takes too (so a good body is never answered with a parse
    /// error), and on damaged bodies it refuses only what serde refuses, within the body.
    #[test]
    fn the_rapidjson_scanner_agrees_with_serde(
        json in json_text(),
        cut in 0usize..64,
        noise in prop::collection::vec(prop::sample::select(b"{}[]\",:0-.eE\\u tnfx\x01".to_vec()), 0..6),
    ) {
        prop_assert_eq!(syntax_error(json.as_bytes()), None, "{}", json);
        // Damaged: cut short and with noise spliced in.
        let mut damaged = json.into_bytes();
        damaged.truncate(damaged.len().saturating_sub(cut));
        let at = damaged.len() / 2;
        damaged.splice(at..at, noise);
        // RapidJSON is the more lenient in strings (it takes invalid UTF-8 and lone low
        // surrogates, and reads a NUL as the end), so only this direction holds: what the
        // scanner refuses, serde refuses too, at an offset within the body; except numbers past
        // RapidJSON's exponent bound that serde reads as zero (`0.0e400`), which Triton refuses.
        if let Some(error) = syntax_error(&damaged) {
            prop_assert!(
                serde_json::from_slice::<Value>(&damaged).is_err()
                    || error.message == "Number too big to be stored in double.",
                "serde took what the scanner refused: {:?}",
                String::from_utf8_lossy(&damaged)
            );
            prop_assert!(error.offset <= damaged.len());
        }
    }

    #[test]
    fn arbitrary_header_lengths_never_panic(body in prop::collection::vec(any::<u8>(), 0..256), split in 0usize..300) {
        let body = Bytes::from(body);
        let _ = decode_infer_request("m", &body, Some(split.min(body.len())));
    }
}

/// The tensor's elements as JSON values (what a client would send).
fn json_values(dtype: DataType, data: &[u8]) -> Vec<Value> {
    let encoded = encode_infer_response(
        &response(
            dtype,
            &[data.len() as i64 / dtype.element_size().unwrap() as i64],
            data,
        ),
        &OutputEncoding::default(),
    )
    .unwrap();
    let json: Value = serde_json::from_slice(&encoded.parts.concat()).unwrap();
    json["outputs"][0]["data"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

//! Between the engine's types and the plugin interface's types.

use bytes::Bytes;

use super::bindings::types::{Datatype, Header, Invocation, Tensor};
use crate::engine::{DataType, InputTensor, OutputTensor};
use crate::invocation::Invocation as HttpInvocation;

/// An engine datatype, as the plugin interface names it.
pub fn datatype_to_wit(dtype: DataType) -> Datatype {
    match dtype {
        DataType::Bool => Datatype::Boolean,
        DataType::Uint8 => Datatype::Uint8,
        DataType::Uint16 => Datatype::Uint16,
        DataType::Uint32 => Datatype::Uint32,
        DataType::Uint64 => Datatype::Uint64,
        DataType::Int8 => Datatype::Int8,
        DataType::Int16 => Datatype::Int16,
        DataType::Int32 => Datatype::Int32,
        DataType::Int64 => Datatype::Int64,
        DataType::Fp16 => Datatype::Fp16,
        DataType::Fp32 => Datatype::Fp32,
        DataType::Fp64 => Datatype::Fp64,
        DataType::Bytes => Datatype::Bytes,
        DataType::Bf16 => Datatype::Bf16,
    }
}

/// The engine datatype of a plugin interface datatype.
pub fn datatype_from_wit(dtype: Datatype) -> DataType {
    DataType::ALL
        .into_iter()
        .find(|&d| datatype_to_wit(d) == dtype)
        .expect("every WIT datatype has an engine datatype")
}

/// A tensor from a plugin, as an engine input.
pub fn input_from_wit(tensor: Tensor) -> InputTensor {
    InputTensor {
        name: tensor.name,
        datatype: datatype_from_wit(tensor.datatype),
        shape: tensor.shape,
        data: Bytes::from(tensor.data),
    }
}

/// An engine output, for a plugin.
pub fn output_to_wit(tensor: &OutputTensor) -> Tensor {
    Tensor {
        name: tensor.name.clone(),
        datatype: datatype_to_wit(tensor.datatype),
        shape: tensor.shape.clone(),
        data: tensor.data.to_vec(),
    }
}

/// A response's outputs, for a plugin.
pub fn outputs_to_wit(outputs: &[OutputTensor]) -> Vec<Tensor> {
    outputs.iter().map(output_to_wit).collect()
}

/// SageMaker's headers every plugin sees in `headers` when a request has them, without its
/// manifest naming them (the interface has no typed field for them): the stateful session's id,
/// and the query string and invocation path a client set (SageMaker forwards them; on the
/// bidirectional stream the handshake's query string counts as the query string).
pub const SAGEMAKER_PLUGIN_HEADERS: [&str; 3] = [
    crate::sessions::SESSION_HEADER,
    crate::invocation::QUERY_STRING_HEADER,
    crate::invocation::INVOCATION_PATH_HEADER,
];

/// The invocation a plugin sees: SageMaker's headers, plus the request headers named in
/// `visible_headers` (lower-case).
pub fn invocation_to_wit(
    route: &str,
    model: &str,
    invocation: &HttpInvocation,
    headers: &http::HeaderMap,
    visible_headers: &[String],
    body: &[u8],
) -> Invocation {
    Invocation {
        route: route.to_owned(),
        model: model.to_owned(),
        content_type: invocation.content_type.clone(),
        accept: invocation.accept.clone(),
        custom_attributes: invocation.custom_attributes.clone(),
        target_variant: invocation.target_variant.clone(),
        inference_id: invocation.inference_id.clone(),
        headers: SAGEMAKER_PLUGIN_HEADERS
            .iter()
            .copied()
            .filter(|name| !visible_headers.iter().any(|v| v == name))
            .chain(visible_headers.iter().map(String::as_str))
            .flat_map(|name| {
                headers.get_all(name).iter().filter_map(move |value| {
                    Some(Header {
                        name: name.to_owned(),
                        value: value.to_str().ok()?.to_owned(),
                    })
                })
            })
            .collect(),
        body: body.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datatypes_round_trip() {
        for dtype in DataType::ALL {
            assert_eq!(datatype_from_wit(datatype_to_wit(dtype)), dtype);
        }
    }
}

//! An inference response as the engine returns it: typed tensors in buffers trident owns.

use bytes::Bytes;

use super::{DataType, ParameterValue};

/// One output tensor; `data` is laid out as for [`super::InputTensor`].
#[derive(Debug, Clone, PartialEq)]
pub struct OutputTensor {
    /// The model output, as named in the model's configuration.
    pub name: String,
    /// The element type.
    pub datatype: DataType,
    /// Dimensions, outermost first, as the model reported them.
    pub shape: Vec<i64>,
    /// The elements, in the same layout as an input's.
    pub data: Bytes,
}

/// One response of a model (decoupled models send several per request).
#[derive(Debug, Clone, PartialEq)]
pub struct InferResponse {
    /// The model that produced the response.
    pub model_name: String,
    /// The version of the model that produced the response.
    pub model_version: i64,
    /// The request id, when the request had one.
    pub id: Option<String>,
    /// The parameters the model set on the response, each key once.
    pub parameters: Vec<(String, ParameterValue)>,
    /// The output tensors, in the order Triton lists them.
    pub outputs: Vec<OutputTensor>,
}

impl InferResponse {
    /// The output called `name`, if the response has it.
    pub fn output(&self, name: &str) -> Option<&OutputTensor> {
        self.outputs.iter().find(|o| o.name == name)
    }
}

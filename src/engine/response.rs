//! An inference response as the engine returns it: typed tensors in buffers trident owns.

use bytes::Bytes;

use super::{DataType, ParameterValue};

/// One output tensor; `data` is laid out as for [`super::InputTensor`].
#[derive(Debug, Clone, PartialEq)]
pub struct OutputTensor {
    pub name: String,
    pub datatype: DataType,
    pub shape: Vec<i64>,
    pub data: Bytes,
}

/// One response of a model (decoupled models send several per request).
#[derive(Debug, Clone, PartialEq)]
pub struct InferResponse {
    pub model_name: String,
    pub model_version: i64,
    /// The request id, when the request had one.
    pub id: Option<String>,
    pub parameters: Vec<(String, ParameterValue)>,
    pub outputs: Vec<OutputTensor>,
}

impl InferResponse {
    /// The output called `name`, if the response has it.
    pub fn output(&self, name: &str) -> Option<&OutputTensor> {
        self.outputs.iter().find(|o| o.name == name)
    }
}

//! An inference request as the engine takes it: typed tensors over shared bytes.

use std::time::Duration;

use bytes::Bytes;

use super::DataType;

/// One input tensor. `data` holds the elements in Triton's layout (little-endian, row-major;
/// `BYTES` elements each as a 4-byte little-endian length and the bytes). It is shared, not
/// copied: a slice of the HTTP body can be handed over as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct InputTensor {
    /// The model input this tensor feeds, as named in the model's configuration.
    pub name: String,
    /// The element type.
    pub datatype: DataType,
    /// Dimensions, outermost first; [`InputTensor::check`] refuses negative ones.
    pub shape: Vec<i64>,
    /// The elements, in the layout described above.
    pub data: Bytes,
}

/// A request or response parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum ParameterValue {
    /// A UTF-8 string (`TRITONSERVER_PARAMETER_STRING`).
    String(String),
    /// A signed 64-bit integer (`TRITONSERVER_PARAMETER_INT`).
    Int(i64),
    /// An unsigned 64-bit integer: a response's `sequence_id` (a correlation id, which Triton
    /// passes as an `INT` parameter; a session's, from 2^63 up, would read as negative).
    UInt(u64),
    /// A boolean (`TRITONSERVER_PARAMETER_BOOL`).
    Bool(bool),
    /// A double-precision float (`TRITONSERVER_PARAMETER_DOUBLE`).
    Double(f64),
}

/// A sequence (correlation) id: Triton takes a number or a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SequenceId {
    /// A numeric id, set with `TRITONSERVER_InferenceRequestSetCorrelationId`.
    Number(u64),
    /// A string id, set with `TRITONSERVER_InferenceRequestSetCorrelationIdString`.
    String(String),
}

/// Where a request stands in a sequence, for stateful models.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sequence {
    /// The sequence the request belongs to; `None` for a request outside any sequence.
    pub id: Option<SequenceId>,
    /// The request is the first of its sequence (`TRITONSERVER_REQUEST_FLAG_SEQUENCE_START`).
    pub start: bool,
    /// The request is the last of its sequence (`TRITONSERVER_REQUEST_FLAG_SEQUENCE_END`).
    pub end: bool,
}

/// A request for one inference on one model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InferRequest {
    /// The model to run, by its name in the repository.
    pub model_name: String,
    /// A specific model version; `None` lets Triton choose by the model's version policy.
    pub model_version: Option<i64>,
    /// The client's request id, echoed in responses.
    pub id: Option<String>,
    /// The input tensors, each passed to Triton in place.
    pub inputs: Vec<InputTensor>,
    /// The outputs to return; empty means every output of the model.
    pub requested_outputs: Vec<String>,
    /// Requested outputs to return as their top `k` classes (Triton's `classification`
    /// parameter, [`super::classification`]), by name.
    pub classification: Vec<(String, u32)>,
    /// Named parameters set on the Triton request, for the model or backend to read.
    pub parameters: Vec<(String, ParameterValue)>,
    /// A deadline Triton enforces while the request waits in the model's queue.
    pub timeout: Option<Duration>,
    /// Scheduling priority (1 is highest; 0 means the model's default).
    pub priority: Option<u64>,
    /// The request's place in a sequence; the default is no sequence.
    pub sequence: Sequence,
}

impl InferRequest {
    /// A request for `model_name` (latest version) with no inputs yet.
    pub fn new(model_name: impl Into<String>) -> InferRequest {
        InferRequest {
            model_name: model_name.into(),
            ..InferRequest::default()
        }
    }

    /// Adds an input tensor.
    pub fn input(
        mut self,
        name: impl Into<String>,
        datatype: DataType,
        shape: impl Into<Vec<i64>>,
        data: impl Into<Bytes>,
    ) -> InferRequest {
        self.inputs.push(InputTensor {
            name: name.into(),
            datatype,
            shape: shape.into(),
            data: data.into(),
        });
        self
    }

    /// Asks for one output by name (by default every output is returned).
    pub fn output(mut self, name: impl Into<String>) -> InferRequest {
        self.requested_outputs.push(name.into());
        self
    }
}

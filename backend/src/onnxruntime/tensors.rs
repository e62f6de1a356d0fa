//! The model's own inputs and outputs, as its ONNX Runtime session describes them.

use ort::session::Session;
use ort::value::ValueType;

use crate::dtype::DataType;
use crate::error::{BackendError, Code};

use super::types;

/// One input or output of the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelTensor {
    /// Its name.
    pub name: String,
    /// Its element type.
    pub dtype: DataType,
    /// Its shape, `-1` where the model leaves a dimension open.
    pub shape: Vec<i64>,
}

/// The model's inputs and outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelTensors {
    /// Inputs, in the model's order.
    pub inputs: Vec<ModelTensor>,
    /// Outputs, in the model's order.
    pub outputs: Vec<ModelTensor>,
}

impl ModelTensors {
    /// Reads them off a session; a tensor Triton cannot carry is an error naming it.
    pub fn of(session: &Session) -> Result<ModelTensors, BackendError> {
        let read = |kind: &str, outlets: &[ort::value::Outlet]| {
            outlets
                .iter()
                .map(|outlet| describe(kind, outlet.name(), outlet.dtype()))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(ModelTensors {
            inputs: read("input", session.inputs())?,
            outputs: read("output", session.outputs())?,
        })
    }
}

/// One outlet as a [`ModelTensor`].
fn describe(kind: &str, name: &str, value: &ValueType) -> Result<ModelTensor, BackendError> {
    let ValueType::Tensor { ty, shape, .. } = value else {
        return Err(BackendError::new(
            Code::Unsupported,
            format!(
                "the model's {kind} '{name}' is a {value}, not a tensor; Triton carries tensors only"
            ),
        ));
    };
    let dtype = types::from_onnx(*ty).ok_or_else(|| {
        BackendError::new(
            Code::Unsupported,
            format!("the model's {kind} '{name}' holds {ty}, a type Triton cannot carry"),
        )
    })?;
    Ok(ModelTensor {
        name: name.to_string(),
        dtype,
        shape: shape.iter().map(|d| if *d < 0 { -1 } else { *d }).collect(),
    })
}

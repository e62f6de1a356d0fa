//! The models the backend serves, one file each. One-to-one models compute outputs from a
//! request's inputs; decoupled models send their own responses through a factory.

pub mod add_sub;
pub mod classifier;
pub mod identity;
pub mod sequence_sum;
pub mod streams;
pub mod text_classifier;

use crate::error::BackendError;
use crate::request::Input;

/// The input named `name`, or an error naming it.
pub fn required<'a, 'r>(
    inputs: &'a [Input<'r>],
    name: &str,
) -> Result<&'a Input<'r>, BackendError> {
    inputs
        .iter()
        .find(|input| input.name == name)
        .ok_or_else(|| BackendError::invalid(format!("the request has no input {name}")))
}

/// The single number an `[1]`- or `[1, 1]`-shaped INT32 input holds.
pub fn scalar_i32(input: &Input<'_>) -> Result<i32, BackendError> {
    let bytes: [u8; 4] = input.data.as_ref().try_into().map_err(|_| {
        BackendError::invalid(format!(
            "input {} must hold exactly one INT32, it holds {} bytes",
            input.name,
            input.data.len()
        ))
    })?;
    Ok(i32::from_le_bytes(bytes))
}

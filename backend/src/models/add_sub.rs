//! Add/sub, the tensors of Triton's own example (and of trident's python `add_sub`):
//! `OUTPUT0 = INPUT0 + INPUT1` and `OUTPUT1 = INPUT0 - INPUT1`, element-wise, for any integer or
//! floating-point type the configuration declares. Integers wrap, as NumPy's do.

use std::borrow::Cow;

use crate::dtype::DataType;
use crate::error::BackendError;
use crate::models::required;
use crate::request::Input;
use crate::response::Output;

/// The requested outputs of add/sub over `inputs`.
pub fn outputs<'r>(
    requested: &[String],
    inputs: &[Input<'r>],
) -> Result<Vec<Output<'r>>, BackendError> {
    let a = required(inputs, "INPUT0")?;
    let b = required(inputs, "INPUT1")?;
    if a.dtype != b.dtype || a.shape != b.shape {
        return Err(BackendError::invalid(format!(
            "add_sub: INPUT0 ({:?} {:?}) and INPUT1 ({:?} {:?}) must have the same type and shape",
            a.dtype, a.shape, b.dtype, b.shape
        )));
    }
    requested
        .iter()
        .map(|name| {
            let op = match name.as_str() {
                "OUTPUT0" => Op::Add,
                "OUTPUT1" => Op::Sub,
                other => {
                    return Err(BackendError::invalid(format!(
                        "add_sub has no output {other}: OUTPUT0 (sum) and OUTPUT1 (difference)"
                    )));
                }
            };
            Ok(Output {
                name: name.clone(),
                dtype: a.dtype,
                shape: a.shape.clone(),
                data: Cow::Owned(apply(op, a.dtype, &a.data, &b.data)?),
            })
        })
        .collect()
}

#[derive(Clone, Copy)]
enum Op {
    Add,
    Sub,
}

/// Applies `op` element-wise to two little-endian tensors of `dtype`.
fn apply(op: Op, dtype: DataType, a: &[u8], b: &[u8]) -> Result<Vec<u8>, BackendError> {
    macro_rules! elementwise {
        ($t:ty, $add:expr, $sub:expr) => {{
            const SIZE: usize = std::mem::size_of::<$t>();
            let (xs, x_rest) = a.as_chunks::<SIZE>();
            let (ys, y_rest) = b.as_chunks::<SIZE>();
            if xs.len() != ys.len() || !x_rest.is_empty() || !y_rest.is_empty() {
                return Err(BackendError::invalid(format!(
                    "add_sub: the inputs hold {} and {} bytes, not the same whole number of {dtype:?} elements",
                    a.len(),
                    b.len()
                )));
            }
            let mut out = Vec::with_capacity(a.len());
            for (x, y) in xs.iter().zip(ys) {
                let (x, y) = (<$t>::from_le_bytes(*x), <$t>::from_le_bytes(*y));
                let z: $t = match op {
                    Op::Add => $add(x, y),
                    Op::Sub => $sub(x, y),
                };
                out.extend_from_slice(&z.to_le_bytes());
            }
            Ok(out)
        }};
    }
    match dtype {
        DataType::I8 => elementwise!(i8, i8::wrapping_add, i8::wrapping_sub),
        DataType::I16 => elementwise!(i16, i16::wrapping_add, i16::wrapping_sub),
        DataType::I32 => elementwise!(i32, i32::wrapping_add, i32::wrapping_sub),
        DataType::I64 => elementwise!(i64, i64::wrapping_add, i64::wrapping_sub),
        DataType::U8 => elementwise!(u8, u8::wrapping_add, u8::wrapping_sub),
        DataType::U16 => elementwise!(u16, u16::wrapping_add, u16::wrapping_sub),
        DataType::U32 => elementwise!(u32, u32::wrapping_add, u32::wrapping_sub),
        DataType::U64 => elementwise!(u64, u64::wrapping_add, u64::wrapping_sub),
        DataType::F32 => elementwise!(f32, |x: f32, y: f32| x + y, |x: f32, y: f32| x - y),
        DataType::F64 => elementwise!(f64, |x: f64, y: f64| x + y, |x: f64, y: f64| x - y),
        other => Err(BackendError::invalid(format!(
            "add_sub does not compute on {other:?} tensors"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor<const N: usize>(name: &str, dtype: DataType, data: Vec<[u8; N]>) -> Input<'static> {
        Input {
            name: name.into(),
            dtype,
            shape: vec![data.len() as i64],
            data: Cow::Owned(data.concat()),
        }
    }

    #[test]
    fn int32_wraps_like_numpy_and_fp32_is_exact() {
        let a = tensor(
            "INPUT0",
            DataType::I32,
            vec![i32::MAX.to_le_bytes(), 5i32.to_le_bytes()],
        );
        let b = tensor(
            "INPUT1",
            DataType::I32,
            vec![1i32.to_le_bytes(), 7i32.to_le_bytes()],
        );
        let out = outputs(&["OUTPUT0".into(), "OUTPUT1".into()], &[a, b]).unwrap();
        let ints = |d: &[u8]| -> Vec<i32> {
            d.as_chunks::<4>()
                .0
                .iter()
                .map(|c| i32::from_le_bytes(*c))
                .collect()
        };
        assert_eq!(ints(&out[0].data), vec![i32::MIN, 12]);
        assert_eq!(ints(&out[1].data), vec![i32::MAX - 1, -2]);

        let a = tensor("INPUT0", DataType::F32, vec![1.5f32.to_le_bytes()]);
        let b = tensor("INPUT1", DataType::F32, vec![0.25f32.to_le_bytes()]);
        let out = outputs(&["OUTPUT1".into()], &[a, b]).unwrap();
        assert_eq!(&*out[0].data, &1.25f32.to_le_bytes());
    }

    #[test]
    fn mismatched_or_missing_inputs_are_refused() {
        let a = tensor("INPUT0", DataType::I32, vec![[0; 4]]);
        let b = tensor("INPUT1", DataType::F32, vec![[0; 4]]);
        assert!(outputs(&["OUTPUT0".into()], &[a.clone(), b]).is_err());
        assert!(outputs(&["OUTPUT0".into()], std::slice::from_ref(&a)).is_err());
        let b = tensor("INPUT1", DataType::I32, vec![[0; 4]]);
        assert!(outputs(&["OUTPUT9".into()], &[a.clone(), b]).is_err());
        let s = tensor("INPUT0", DataType::Bytes, vec![[0; 4]]);
        let t = tensor("INPUT1", DataType::Bytes, vec![[0; 4]]);
        assert!(outputs(&["OUTPUT0".into()], &[s, t]).is_err());
    }
}

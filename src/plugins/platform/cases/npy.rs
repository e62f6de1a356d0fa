//! NumPy's `.npy` files, read for golden cases: a reference tensor (`numpy.save`) a case's
//! expected tensor takes its values from (`data_file`), so that an image adapter can be held to
//! every value of its 150,528 floats, which a cases file cannot hold.
//!
//! Format versions 1 to 3; little-endian or byte-sized elements (`<f2`, `<f4`, `<f8`, `|i1`,
//! `<i2`, `<i4`, `<i8`, `|u1`, `<u2`, `<u4`, `<u8`, `|b1`), C order. Anything else (big-endian,
//! Fortran order, structured or object arrays, pickles) is refused, naming what it is; the data
//! must be exactly the shape's elements.

use serde_json::{Number, Value};

/// An array read from a `.npy` file.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// Its dimensions.
    pub shape: Vec<u64>,
    /// Its elements in C order, as JSON numbers (integers exact, floats as `f64`; a float that
    /// is not finite as `null`, which no answer matches).
    pub values: Vec<Value>,
}

/// The array in `bytes`, a `.npy` file's contents.
pub fn read(bytes: &[u8]) -> Result<Array, String> {
    let rest = bytes
        .strip_prefix(b"\x93NUMPY")
        .ok_or("is not a .npy file (numpy.save writes one)")?;
    let (&[major, _minor], rest) = rest.split_first_chunk::<2>().ok_or("ends in its header")?;
    let (header_len, rest) = match major {
        1 => {
            let (len, rest) = rest.split_first_chunk::<2>().ok_or("ends in its header")?;
            (usize::from(u16::from_le_bytes(*len)), rest)
        }
        2 | 3 => {
            let (len, rest) = rest.split_first_chunk::<4>().ok_or("ends in its header")?;
            (u32::from_le_bytes(*len) as usize, rest)
        }
        other => return Err(format!("is .npy format version {other}, not 1, 2 or 3")),
    };
    if rest.len() < header_len {
        return Err("ends in its header".into());
    }
    let (header, data) = rest.split_at(header_len);
    let header = std::str::from_utf8(header).map_err(|_| "its header is not text")?;
    let descr = field(header, "descr")?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    if field(header, "fortran_order")? != "False" {
        return Err("is in Fortran order; save it in C order (numpy.ascontiguousarray)".into());
    }
    let shape = shape(field(header, "shape")?)?;
    let kind = Kind::of(descr)?;
    let count = shape
        .iter()
        .try_fold(1u64, |n, d| n.checked_mul(*d))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or("its shape holds too many elements")?;
    if count.checked_mul(kind.size) != Some(data.len()) {
        return Err(format!(
            "holds {} bytes of data, where its shape {shape:?} of {descr} takes {}",
            data.len(),
            count.saturating_mul(kind.size)
        ));
    }
    let values = data
        .chunks_exact(kind.size)
        .map(|e| kind.value(e))
        .collect();
    Ok(Array { shape, values })
}

/// The text of `key`'s value in the header's dictionary (`{'descr': '<f4', ...}`).
fn field<'a>(header: &'a str, key: &str) -> Result<&'a str, String> {
    let missing = || format!("its header has no '{key}'");
    let at = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))
        .ok_or_else(missing)?;
    let after = header[at + key.len() + 2..]
        .trim_start()
        .strip_prefix(':')
        .ok_or_else(missing)?
        .trim_start();
    let end = match after.starts_with('(') {
        true => after.find(')').map(|i| i + 1),
        false => after.find([',', '}']),
    }
    .ok_or_else(missing)?;
    Ok(after[..end].trim())
}

/// A shape tuple's dimensions (`(1, 3, 224, 224)`, `(5,)`, `()`).
fn shape(text: &str) -> Result<Vec<u64>, String> {
    let inner = text
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format!("its shape {text} is not a tuple"))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            d.parse()
                .map_err(|_| format!("its shape {text} is not of whole numbers"))
        })
        .collect()
}

/// An element type the reader takes.
#[derive(Debug, Clone, Copy)]
struct Kind {
    code: u8,
    size: usize,
}

impl Kind {
    fn of(descr: &str) -> Result<Kind, String> {
        let refuse = || {
            format!(
                "holds {descr} elements; a case's reference takes little-endian numbers \
                 (<f2, <f4, <f8, |i1, <i2, <i4, <i8, |u1, <u2, <u4, <u8, |b1)"
            )
        };
        let (order, rest) = descr.split_at_checked(1).ok_or_else(refuse)?;
        let (code, size) = rest.split_at_checked(1).ok_or_else(refuse)?;
        let size: usize = size.parse().map_err(|_| refuse())?;
        let code = code.as_bytes()[0];
        let known = matches!(
            (code, size),
            (b'f', 2 | 4 | 8) | (b'i' | b'u', 1 | 2 | 4 | 8) | (b'b', 1)
        );
        let endian = order == "<" || (order == "|" && size == 1);
        match known && endian {
            true => Ok(Kind { code, size }),
            false => Err(refuse()),
        }
    }

    fn value(self, e: &[u8]) -> Value {
        let float = |f: f64| Number::from_f64(f).map_or(Value::Null, Value::Number);
        match (self.code, self.size) {
            (b'f', 2) => float(f64::from(half::f16::from_le_bytes([e[0], e[1]]).to_f32())),
            (b'f', 4) => float(f64::from(f32::from_le_bytes(
                e.try_into().unwrap_or_default(),
            ))),
            (b'f', _) => float(f64::from_le_bytes(e.try_into().unwrap_or_default())),
            (b'b', _) => Value::Bool(e[0] != 0),
            (b'i', 1) => Value::from(e[0] as i8),
            (b'i', 2) => Value::from(i16::from_le_bytes([e[0], e[1]])),
            (b'i', 4) => Value::from(i32::from_le_bytes(e.try_into().unwrap_or_default())),
            (b'i', _) => Value::from(i64::from_le_bytes(e.try_into().unwrap_or_default())),
            (_, 1) => Value::from(e[0]),
            (_, 2) => Value::from(u16::from_le_bytes([e[0], e[1]])),
            (_, 4) => Value::from(u32::from_le_bytes(e.try_into().unwrap_or_default())),
            _ => Value::from(u64::from_le_bytes(e.try_into().unwrap_or_default())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `.npy` file as numpy.save writes it (version 1, header padded to 64 bytes).
    pub(crate) fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend((header.len() as u16).to_le_bytes());
        out.extend(header.as_bytes());
        out.extend(data);
        out
    }

    #[test]
    fn numbers_of_each_kind_are_read_in_c_order() {
        let floats: Vec<u8> = [0.5f32, -1.25, 3.0, 4.0, 5.5, 6.0]
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect();
        let array = read(&npy("<f4", "(2, 3)", &floats)).unwrap();
        assert_eq!(array.shape, vec![2, 3]);
        assert_eq!(array.values[1], serde_json::json!(-1.25));
        let ints: Vec<u8> = [7i64, -9].iter().flat_map(|i| i.to_le_bytes()).collect();
        let array = read(&npy("<i8", "(2,)", &ints)).unwrap();
        assert_eq!(
            array.values,
            vec![serde_json::json!(7), serde_json::json!(-9)]
        );
        let bytes = read(&npy("|u1", "(3,)", &[0, 128, 255])).unwrap();
        assert_eq!(bytes.values[2], serde_json::json!(255));
        let half = read(&npy("<f2", "()", &half::f16::from_f32(0.5).to_le_bytes())).unwrap();
        assert_eq!(
            (half.shape.len(), half.values[0].clone()),
            (0, serde_json::json!(0.5))
        );
        let nan = read(&npy("<f8", "(1,)", &f64::NAN.to_le_bytes())).unwrap();
        assert_eq!(nan.values[0], Value::Null);
    }

    #[test]
    fn what_it_cannot_read_is_named() {
        let refuse = |bytes: &[u8], says: &str| {
            let why = read(bytes).unwrap_err();
            assert!(why.contains(says), "{why}");
        };
        refuse(b"PK\x03\x04", "not a .npy file");
        refuse(&npy(">f4", "(1,)", &[0; 4]), ">f4");
        refuse(&npy("<c8", "(1,)", &[0; 8]), "<c8");
        refuse(&npy("|O", "(1,)", &[0; 8]), "|O");
        refuse(&npy("<f4", "(2,)", &[0; 4]), "holds 4 bytes of data");
        refuse(&npy("<f4", "(3, 4)", &[0; 4]), "takes 48");
        let mut fortran = npy("<f4", "(1,)", &[0; 4]);
        let at = fortran.windows(5).position(|w| w == b"False").unwrap();
        fortran[at..at + 5].copy_from_slice(b"True ");
        refuse(&fortran, "Fortran order");
        refuse(
            &npy("<f4", "(18446744073709551615, 2)", &[]),
            "too many elements",
        );
        refuse(&b"\x93NUMPY\x01\x00\xff\xff{"[..], "ends in its header");
        refuse(&b"\x93NUMPY\x09\x00"[..], "version 9");
    }
}

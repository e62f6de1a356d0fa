//! Tensor `data` in JSON, straight to and from Triton's byte layout: numbers are parsed into the
//! typed buffer as they are read (no intermediate `Value` tree) and written from it with `itoa`
//! and `zmij` (same output as `ryu`, about twice as fast here).
//!
//! Floats are written as Triton's frontend writes them: widened to double, in the shortest form
//! that reads back as that double (FP32 `0.1` is `0.10000000149011612`), so clients comparing
//! against `numpy.float32(...).tolist()` see the same numbers. `FP16` and `BF16` travel as
//! ordinary JSON numbers (Triton's frontend refuses them in JSON); non-finite floats are written
//! as `NaN`, `Infinity` and `-Infinity`, which Python's `json` reads.

use std::fmt;

use serde::de::{self, DeserializeSeed, SeqAccess, Visitor};

use super::ProtocolError;
use super::json_syntax::{SyntaxError, syntax_error};
use crate::engine::DataType;

/// Why a tensor's JSON `data` was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataError {
    /// RapidJSON refuses the text, so Triton refuses the whole body with its parse error (a
    /// number it bounds, such as `0e400`, which serde takes); the offset is within the data.
    Syntax(SyntaxError),
    /// The values do not fit the datatype (serde's words).
    Invalid(String),
}

impl DataError {
    /// The message, for data that starts at byte `base` of the body: Triton's parse error for
    /// [`DataError::Syntax`] (naming no input, as Triton's), else `input '<name>': <why>`.
    pub fn message(&self, input: &str, base: usize) -> String {
        match self {
            DataError::Syntax(error) => format!(
                "failed to parse the request JSON buffer: {} at {}",
                error.message,
                base + error.offset
            ),
            DataError::Invalid(why) => format!("input '{input}': {why}"),
        }
    }
}

/// Parses a tensor's JSON `data` (flat or nested arrays, or a single scalar) into Triton's byte
/// layout for `dtype`; returns the bytes and the element count. Data the fast path declines is
/// checked by RapidJSON's rules before serde reads it.
pub fn decode_json_data(raw: &str, dtype: DataType) -> Result<(Vec<u8>, usize), DataError> {
    if let Some(decoded) = super::float_array::decode(raw, dtype) {
        return Ok(decoded);
    }
    if let Some(error) = syntax_error(raw.as_bytes()) {
        return Err(DataError::Syntax(error));
    }
    decode_with_serde(raw, dtype).map_err(DataError::Invalid)
}

/// The general path: any JSON, each element through serde's visitor, errors worded.
pub(crate) fn decode_with_serde(raw: &str, dtype: DataType) -> Result<(Vec<u8>, usize), String> {
    let mut out = Vec::with_capacity(raw.len());
    let mut count = 0usize;
    let mut deserializer = serde_json::Deserializer::from_str(raw);
    ElementSeed {
        dtype,
        out: &mut out,
        count: &mut count,
    }
    .deserialize(&mut deserializer)
    .and_then(|()| deserializer.end())
    .map_err(|e| strip_position(e.to_string()))?;
    Ok((out, count))
}

/// serde_json appends " at line 1 column N"; the column in a fragment helps nobody.
fn strip_position(mut message: String) -> String {
    if let Some(at) = message.rfind(" at line ") {
        message.truncate(at);
    }
    message
}

struct ElementSeed<'o> {
    dtype: DataType,
    out: &'o mut Vec<u8>,
    count: &'o mut usize,
}

impl<'de> DeserializeSeed<'de> for ElementSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl ElementSeed<'_> {
    fn push_int<E: de::Error>(&mut self, value: i128) -> Result<(), E> {
        let out = &mut *self.out;
        let fits = match self.dtype {
            DataType::Int8 => i8::try_from(value)
                .map(|v| out.extend(v.to_le_bytes()))
                .is_ok(),
            DataType::Int16 => i16::try_from(value)
                .map(|v| out.extend(v.to_le_bytes()))
                .is_ok(),
            DataType::Int32 => i32::try_from(value)
                .map(|v| out.extend(v.to_le_bytes()))
                .is_ok(),
            DataType::Int64 => i64::try_from(value)
                .map(|v| out.extend(v.to_le_bytes()))
                .is_ok(),
            DataType::Uint8 => u8::try_from(value).map(|v| out.push(v)).is_ok(),
            DataType::Uint16 => u16::try_from(value)
                .map(|v| out.extend(v.to_le_bytes()))
                .is_ok(),
            DataType::Uint32 => u32::try_from(value)
                .map(|v| out.extend(v.to_le_bytes()))
                .is_ok(),
            DataType::Uint64 => u64::try_from(value)
                .map(|v| out.extend(v.to_le_bytes()))
                .is_ok(),
            DataType::Fp16 | DataType::Bf16 | DataType::Fp32 | DataType::Fp64 => {
                return self.push_float(value as f64);
            }
            DataType::Bool | DataType::Bytes => return Err(self.wrong("a number")),
        };
        if !fits {
            return Err(E::custom(format!(
                "{value} is out of range for {}",
                self.dtype
            )));
        }
        *self.count += 1;
        Ok(())
    }

    fn push_float<E: de::Error>(&mut self, value: f64) -> Result<(), E> {
        match self.dtype {
            DataType::Fp32 => self.out.extend((value as f32).to_le_bytes()),
            DataType::Fp64 => self.out.extend(value.to_le_bytes()),
            DataType::Fp16 => self.out.extend(half::f16::from_f64(value).to_le_bytes()),
            DataType::Bf16 => self.out.extend(half::bf16::from_f64(value).to_le_bytes()),
            _ => {
                return Err(E::custom(format!(
                    "{value} is not a valid {} value (integers only)",
                    self.dtype
                )));
            }
        }
        *self.count += 1;
        Ok(())
    }

    fn wrong<E: de::Error>(&self, found: &str) -> E {
        E::custom(format!("expected {} data, found {found}", self.dtype))
    }
}

impl<'de> Visitor<'de> for ElementSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} tensor data", self.dtype)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(ElementSeed {
                dtype: self.dtype,
                out: &mut *self.out,
                count: &mut *self.count,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<(), E> {
        if self.dtype != DataType::Bool {
            return Err(self.wrong("a boolean"));
        }
        self.out.push(u8::from(value));
        *self.count += 1;
        Ok(())
    }

    fn visit_i64<E: de::Error>(mut self, value: i64) -> Result<(), E> {
        self.push_int(i128::from(value))
    }

    fn visit_u64<E: de::Error>(mut self, value: u64) -> Result<(), E> {
        self.push_int(i128::from(value))
    }

    fn visit_f64<E: de::Error>(mut self, value: f64) -> Result<(), E> {
        self.push_float(value)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<(), E> {
        if self.dtype != DataType::Bytes {
            return Err(self.wrong("a string"));
        }
        let len = u32::try_from(value.len()).map_err(|_| E::custom("string element too long"))?;
        self.out.extend(len.to_le_bytes());
        self.out.extend(value.as_bytes());
        *self.count += 1;
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(self.wrong("null"))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(self.wrong("an object"))
    }
}

/// Iterates the elements of a `BYTES` tensor (each a 4-byte little-endian length and the bytes).
pub fn bytes_elements(data: &[u8]) -> impl Iterator<Item = Result<&[u8], ProtocolError>> {
    crate::engine::shape::bytes_elements(data).map(|element| {
        element.map_err(|_| {
            ProtocolError::Internal("a BYTES tensor from the model is malformed".into())
        })
    })
}

/// Appends `data` (Triton's layout for `dtype`) to `out` as a flat JSON array.
pub fn write_json_data(
    out: &mut Vec<u8>,
    dtype: DataType,
    data: &[u8],
) -> Result<(), ProtocolError> {
    out.push(b'[');
    let mut first = true;
    let mut separator = |out: &mut Vec<u8>| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
    };
    macro_rules! ints {
        ($t:ty) => {{
            let mut buffer = itoa::Buffer::new();
            for chunk in data.chunks_exact(size_of::<$t>()) {
                separator(out);
                let value =
                    <$t>::from_le_bytes(chunk.try_into().expect("chunk has the type's size"));
                out.extend_from_slice(buffer.format(value).as_bytes());
            }
        }};
    }
    match dtype {
        DataType::Bool => {
            for &b in data {
                separator(out);
                out.extend_from_slice(if b != 0 { b"true" } else { b"false" });
            }
        }
        DataType::Uint8 => ints!(u8),
        DataType::Uint16 => ints!(u16),
        DataType::Uint32 => ints!(u32),
        DataType::Uint64 => ints!(u64),
        DataType::Int8 => ints!(i8),
        DataType::Int16 => ints!(i16),
        DataType::Int32 => ints!(i32),
        DataType::Int64 => ints!(i64),
        DataType::Fp32 => {
            for chunk in data.as_chunks::<4>().0 {
                separator(out);
                write_f32(out, f32::from_le_bytes(*chunk));
            }
        }
        DataType::Fp64 => {
            for chunk in data.as_chunks::<8>().0 {
                separator(out);
                write_f64(out, f64::from_le_bytes(*chunk));
            }
        }
        DataType::Fp16 => {
            for chunk in data.as_chunks::<2>().0 {
                separator(out);
                write_f32(out, half::f16::from_le_bytes(*chunk).to_f32());
            }
        }
        DataType::Bf16 => {
            for chunk in data.as_chunks::<2>().0 {
                separator(out);
                write_f32(out, half::bf16::from_le_bytes(*chunk).to_f32());
            }
        }
        DataType::Bytes => {
            for element in bytes_elements(data) {
                separator(out);
                write_json_string(out, &String::from_utf8_lossy(element?));
            }
        }
    }
    out.push(b']');
    Ok(())
}

fn write_f32(out: &mut Vec<u8>, value: f32) {
    write_f64(out, f64::from(value));
}

fn write_f64(out: &mut Vec<u8>, value: f64) {
    if value.is_finite() {
        out.extend_from_slice(zmij::Buffer::new().format_finite(value).as_bytes());
    } else {
        write_non_finite(out, value.is_nan(), value.is_sign_negative());
    }
}

fn write_non_finite(out: &mut Vec<u8>, nan: bool, negative: bool) {
    out.extend_from_slice(match (nan, negative) {
        (true, _) => b"NaN",
        (false, false) => b"Infinity",
        (false, true) => b"-Infinity",
    });
}

/// Appends `text` as a JSON string.
pub fn write_json_string(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(&mut *out, text).expect("writing to a Vec cannot fail");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(dtype: DataType, json: &str) -> String {
        let (bytes, _) = decode_json_data(json, dtype).unwrap();
        let mut out = Vec::new();
        write_json_data(&mut out, dtype, &bytes).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_numeric_type_round_trips() {
        assert_eq!(roundtrip(DataType::Bool, "[true,false]"), "[true,false]");
        assert_eq!(roundtrip(DataType::Uint8, "[0,255]"), "[0,255]");
        assert_eq!(roundtrip(DataType::Uint16, "[65535]"), "[65535]");
        assert_eq!(roundtrip(DataType::Uint32, "[4294967295]"), "[4294967295]");
        assert_eq!(
            roundtrip(DataType::Uint64, "[18446744073709551615]"),
            "[18446744073709551615]"
        );
        assert_eq!(roundtrip(DataType::Int8, "[-128,127]"), "[-128,127]");
        assert_eq!(roundtrip(DataType::Int16, "[-32768]"), "[-32768]");
        assert_eq!(roundtrip(DataType::Int32, "[[1,-2],[3,4]]"), "[1,-2,3,4]");
        assert_eq!(
            roundtrip(DataType::Int64, "[-9223372036854775808]"),
            "[-9223372036854775808]"
        );
        assert_eq!(
            roundtrip(DataType::Fp32, "[0.1,1,-2.5e3]"),
            "[0.10000000149011612,1.0,-2500.0]"
        );
        assert_eq!(roundtrip(DataType::Fp64, "[0.1]"), "[0.1]");
        assert_eq!(roundtrip(DataType::Fp16, "[0.5,-2]"), "[0.5,-2.0]");
        assert_eq!(roundtrip(DataType::Fp32, "[3]"), "[3.0]");
        assert_eq!(roundtrip(DataType::Bf16, "[1.5]"), "[1.5]");
        assert_eq!(
            roundtrip(DataType::Bytes, r#"["a","", "é\n"]"#),
            r#"["a","","é\n"]"#
        );
    }

    #[test]
    fn layout_is_little_endian_and_counted() {
        let (bytes, count) = decode_json_data("[[1],[258]]", DataType::Int16).unwrap();
        assert_eq!(bytes, [1, 0, 2, 1]);
        assert_eq!(count, 2);
        let (bytes, count) = decode_json_data(r#"["ab"]"#, DataType::Bytes).unwrap();
        assert_eq!(bytes, [2, 0, 0, 0, b'a', b'b']);
        assert_eq!(count, 1);
        let (_, count) = decode_json_data("7", DataType::Int32).unwrap();
        assert_eq!(count, 1);
        let (_, count) = decode_json_data("[]", DataType::Int32).unwrap();
        assert_eq!(count, 0);
    }

    #[test]
    fn wrong_values_are_refused_with_a_reason() {
        let cases = [
            (DataType::Int8, "[128]", "out of range"),
            (DataType::Uint8, "[-1]", "out of range"),
            (DataType::Int32, "[1.5]", "integers only"),
            (
                DataType::Int32,
                r#"["1"]"#,
                "expected INT32 data, found a string",
            ),
            (DataType::Bool, "[1]", "expected BOOL data, found a number"),
            (
                DataType::Bytes,
                "[1]",
                "expected BYTES data, found a number",
            ),
            (DataType::Fp32, "[null]", "found null"),
            (DataType::Fp32, r#"[{"a":1}]"#, "found an object"),
            // What RapidJSON refuses is Triton's parse error, at the offset in the body.
            (DataType::Fp32, "[1,", "Invalid value. at 13"),
            (
                DataType::Fp32,
                "[1] 2",
                "must not be followed by other values. at 14",
            ),
            (
                DataType::Int32,
                "[0e400]",
                "Number too big to be stored in double. at 11",
            ),
            (
                DataType::Fp32,
                "[0e400]",
                "Number too big to be stored in double. at 11",
            ),
        ];
        for (dtype, json, expected) in cases {
            let error = decode_json_data(json, dtype).unwrap_err().message("X", 10);
            assert!(error.contains(expected), "{json}: {error}");
        }
    }

    #[test]
    fn non_finite_floats_are_written_as_python_reads_them() {
        let mut out = Vec::new();
        let data: Vec<u8> = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        write_json_data(&mut out, DataType::Fp32, &data).unwrap();
        assert_eq!(out, b"[NaN,Infinity,-Infinity]");
    }

    #[test]
    fn malformed_bytes_tensors_are_errors() {
        let mut out = Vec::new();
        assert!(write_json_data(&mut out, DataType::Bytes, &[5, 0, 0, 0, b'a']).is_err());
        assert!(write_json_data(&mut out, DataType::Bytes, &[1, 0]).is_err());
    }

    /// The float fast path (`float_array`) either declines or gives the general path's bytes.
    mod fast_path {
        use super::super::*;
        use crate::protocol::float_array;
        use proptest::prelude::*;

        const FLOATS: [DataType; 4] = [
            DataType::Fp16,
            DataType::Bf16,
            DataType::Fp32,
            DataType::Fp64,
        ];

        /// The fast path gives the general path's bytes, or declines; where serde refuses a
        /// number past the double range that RapidJSON takes, it reads infinity (as Triton).
        fn agrees(raw: &str) {
            for dtype in FLOATS {
                let general = decode_with_serde(raw, dtype).ok();
                let Some(fast) = float_array::decode(raw, dtype) else {
                    continue;
                };
                if general.is_none() {
                    let (doubles, _) = float_array::decode(raw, DataType::Fp64).unwrap();
                    let infinite = doubles
                        .chunks(8)
                        .any(|d| f64::from_le_bytes(d.try_into().unwrap()).is_infinite());
                    assert!(infinite, "{raw} as {dtype}: only the fast path took it");
                    continue;
                }
                let (fast, general) = (fast, general.unwrap());
                assert_eq!(fast.1, general.1, "{raw} as {dtype}");
                // Byte for byte, but for an integer `-0`: Triton's reader (RapidJSON) takes it
                // as the integer 0, so +0.0, where serde reads -0.0.
                let size = dtype.element_size().unwrap();
                for (f, g) in fast.0.chunks(size).zip(general.0.chunks(size)) {
                    let negative_zero =
                        |c: &[u8]| c[..size - 1].iter().all(|&b| b == 0) && c[size - 1] == 0x80;
                    let positive_zero = f.iter().all(|&b| b == 0);
                    assert!(
                        f == g || (positive_zero && negative_zero(g)),
                        "{raw} as {dtype}: {:?} against {:?}",
                        fast.0,
                        general.0
                    );
                }
            }
        }

        #[test]
        fn gives_the_general_paths_bytes() {
            for raw in [
                "[1, 2.5, -3e2, 0.1, 1E-7, 123456789012345678901234567890]",
                "[[0.1,0.2],[0.3,0.4]]",
                " [ [ ] , [ 1 ] ] ",
                "[]",
                "7",
                "-0",
                "-0.0",
                "[9007199254740993, 18446744073709551615, -9223372036854775808]",
                "[5e-324, 65504, 65520, 3.4028235e38, 3.5e38, 1e-400]",
                "[0.000001, 123.456e-5, 1.5E+3, 9007199254740993.5, 0.1e-22, 12345678901234567890.5]",
                "[1e22, 1e23, 4.35e-23, 1234567890123456789, 12345678901234567890, 0.30000000000000004]",
            ] {
                assert!(float_array::decode(raw, DataType::Fp32).is_some(), "{raw}");
                agrees(raw);
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

            #[test]
            fn on_any_doubles(values in proptest::collection::vec(any::<f64>(), 0..20)) {
                let finite: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
                let raw = serde_json::to_string(&finite).unwrap();
                prop_assert!(float_array::decode(&raw, DataType::Fp64).is_some());
                agrees(&raw);
            }

            #[test]
            fn on_any_decimal(
                numbers in proptest::collection::vec("-?(0|[1-9][0-9]{0,21})(\\.[0-9]{1,21})?([eE][+-]?[0-9]{1,3})?", 1..6)
            ) {
                agrees(&format!("[{}]", numbers.join(",")));
            }

            #[test]
            fn on_any_text(raw in "[\\[\\]0-9eE.,+\\- ]{0,24}") {
                agrees(&raw);
            }
        }
    }
}

//! A fast path for the commonest large JSON payload: a (possibly nested) array of numbers for a
//! floating-point tensor. It reads the text once, checks the JSON grammar itself and parses each
//! number with the standard library's correctly rounded parser, where the general path goes
//! through serde's visitor per element (about half the time of a 1 MB JSON request went there).
//!
//! It gives exactly the bytes the general path gives, or nothing: anything it does not take as
//! is (a string, `null`, an object, bad grammar, very deep nesting, a number RapidJSON refuses)
//! returns `None`, and the caller uses the general parser, which also words the error. One
//! difference is Triton's: a number past the double range that RapidJSON still takes (`9e308`)
//! is infinity, as Triton's frontend reads it, where serde refuses it.

use super::json_syntax::{nan_or_infinity, number_too_big};
use crate::engine::DataType;

/// Arrays nested deeper than this go to the general parser (serde's own limit is 128).
const MAX_DEPTH: usize = 100;

/// The most a value's buffer reserves before its numbers are read (64 KiB: a 16,000-element
/// FP32 tensor decodes without growing it; a larger one doubles it a few times).
const FIRST_RESERVATION: usize = 64 * 1024;

/// Spare room a finished buffer may keep without being shrunk (a reallocation saves nothing
/// below it).
const SMALL_VALUE: usize = 64;

/// What the reader expects next.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A number or `[` (at the start, after `,`).
    Value,
    /// A number, `[` or `]` (just after `[`).
    ValueOrClose,
    /// `,` or `]` (after an element).
    CommaOrClose,
    /// Nothing more: the outermost value has ended.
    End,
}

/// Triton's bytes for `raw` (a JSON number or nested arrays of them) as a tensor of `dtype`
/// (`FP16`, `BF16`, `FP32` or `FP64`), and the element count; `None` when `raw` is anything else.
pub fn decode(raw: &str, dtype: DataType) -> Option<(Vec<u8>, usize)> {
    let bytes = raw.as_bytes();
    let (out, count, end) = decode_at(bytes, 0, dtype)?;
    (skip_whitespace(bytes, end) == bytes.len()).then_some((out, count))
}

/// As [`decode`], for the value starting at `start` in `bytes` (after any whitespace) and ending
/// wherever its outermost array or number ends: its bytes, its element count and the offset
/// just past it. What follows it is the caller's to read (the request's own reader reads `data`
/// this way, in the same pass as the rest of the request).
pub fn decode_at(bytes: &[u8], start: usize, dtype: DataType) -> Option<(Vec<u8>, usize, usize)> {
    if !matches!(
        dtype,
        DataType::Fp16 | DataType::Bf16 | DataType::Fp32 | DataType::Fp64
    ) {
        return None;
    }
    // Room from what this value can need, never from the text after it: `bytes` may be a whole
    // request whose other inputs follow, and a reservation as large as the rest of the body for
    // each of 100,000 one-element inputs was 168 GB of address space. The first reservation is
    // capped, the buffer doubles as the numbers come, and a value that ends far short of its
    // reservation gives the rest back, so a decoded value holds at most twice its bytes.
    let mut out = Vec::with_capacity(bytes.len().saturating_sub(start).min(FIRST_RESERVATION));
    let (mut count, mut depth, mut at) = (0usize, 0usize, start);
    let mut expect = Expect::Value;
    loop {
        at = skip_whitespace(bytes, at);
        let byte = bytes.get(at).copied();
        match (expect, byte) {
            (Expect::Value | Expect::ValueOrClose, Some(b'[')) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return None;
                }
                at += 1;
                expect = Expect::ValueOrClose;
            }
            (Expect::ValueOrClose | Expect::CommaOrClose, Some(b']')) => {
                depth -= 1;
                at += 1;
                expect = after_value(depth);
            }
            (Expect::Value | Expect::ValueOrClose, Some(b'-' | b'0'..=b'9' | b'N' | b'I')) => {
                let (end, value) = number_or_non_finite(bytes, at)?;
                push(&mut out, dtype, value);
                count += 1;
                at = end;
                expect = after_value(depth);
            }
            (Expect::CommaOrClose, Some(b',')) => {
                at += 1;
                expect = Expect::Value;
            }
            _ => return None,
        }
        if expect == Expect::End {
            if out.capacity() > 2 * out.len() + SMALL_VALUE {
                out.shrink_to_fit();
            }
            return Some((out, count, at));
        }
    }
}

fn after_value(depth: usize) -> Expect {
    if depth == 0 {
        Expect::End
    } else {
        Expect::CommaOrClose
    }
}

fn skip_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
        at += 1;
    }
    at
}

/// [`number`], or `NaN`, `Infinity` or `Inf` (with a `-`), which Triton reads as numbers.
fn number_or_non_finite(bytes: &[u8], start: usize) -> Option<(usize, f64)> {
    let sign = usize::from(bytes[start] == b'-');
    match bytes.get(start + sign) {
        Some(b'N' | b'I') => nan_or_infinity(bytes, start).ok(),
        _ => number(bytes, start),
    }
}

/// Powers of ten a double holds exactly.
const EXACT_POWERS: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The JSON number starting at `start` (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`):
/// where it ends and its value as the general path reads it; `None` if the text there is not a
/// JSON number, or one RapidJSON refuses (`number_too_big`: Triton's frontend refuses the
/// body).
///
/// The value: an integer of at most 19 digits is that integer widened to a double (as serde
/// reads integers, but `-0` is +0.0: RapidJSON reads it as the integer 0); a decimal whose
/// digits fit 2^53 with a power of ten up to 22 is one exact multiplication or division, which
/// IEEE rounds correctly (Clinger's fast path); anything else goes to the standard library's
/// correctly rounded parser. All three give the double nearest the decimal, as serde's
/// `float_roundtrip` does.
fn number(bytes: &[u8], start: usize) -> Option<(usize, f64)> {
    let negative = bytes[start] == b'-';
    let mut at = start + usize::from(negative);
    let (mut mantissa, mut digits) = (0u64, 0usize);
    // The digits before and after the point, as one integer (exact up to 19 digits).
    let mut take_digits = |at: &mut usize| {
        let from = *at;
        while let Some(&byte) = bytes.get(*at).filter(|b| b.is_ascii_digit()) {
            mantissa = mantissa
                .wrapping_mul(10)
                .wrapping_add(u64::from(byte - b'0'));
            digits += 1;
            *at += 1;
        }
        *at - from
    };
    match bytes.get(at) {
        Some(b'0') => at += 1,
        Some(b'1'..=b'9') => {
            take_digits(&mut at);
        }
        _ => return None,
    }
    let mut fraction = 0usize;
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        fraction = take_digits(&mut at);
        if fraction == 0 {
            return None;
        }
    }
    let mut exponent: Option<i64> = None;
    if let Some(b'e' | b'E') = bytes.get(at) {
        at += 1;
        let sign = match bytes.get(at) {
            Some(b'-') => {
                at += 1;
                -1
            }
            Some(b'+') => {
                at += 1;
                1
            }
            _ => 1,
        };
        let from = at;
        let mut value = 0i64;
        while let Some(&byte) = bytes.get(at).filter(|b| b.is_ascii_digit()) {
            value = value
                .saturating_mul(10)
                .saturating_add(i64::from(byte - b'0'));
            at += 1;
        }
        if at == from {
            return None;
        }
        exponent = Some(sign * value);
    }
    let signed = |value: f64| if negative { -value } else { value };
    let value = if digits <= 19 && fraction == 0 && exponent.is_none() {
        // An integer, as RapidJSON reads it: `-0` is the integer 0, so +0.0 (IEEE's -0 + 0 is
        // +0; any other value is unchanged; `-0.0` stays -0.0 below).
        Some(signed(mantissa as f64) + 0.0)
    } else {
        let power = exponent
            .unwrap_or(0)
            .saturating_sub(i64::try_from(fraction).unwrap_or(i64::MAX));
        match usize::try_from(power.unsigned_abs()) {
            Ok(index) if digits <= 19 && mantissa <= 1 << 53 && index < EXACT_POWERS.len() => {
                let magnitude = if power < 0 {
                    mantissa as f64 / EXACT_POWERS[index]
                } else {
                    mantissa as f64 * EXACT_POWERS[index]
                };
                Some(signed(magnitude))
            }
            _ => correctly_rounded(&bytes[start..at]),
        }
    };
    // Only an exponent or 308 integer digits can pass RapidJSON's bound: most skip the check.
    if (exponent.is_some() || digits > 300) && number_too_big(&bytes[start..at]) {
        return None;
    }
    value.map(|v| (at, v))
}

/// The standard library's correctly rounded reading of a number's text (ASCII digits, signs,
/// points and exponents).
fn correctly_rounded(number: &[u8]) -> Option<f64> {
    std::str::from_utf8(number).ok()?.parse().ok()
}

fn push(out: &mut Vec<u8>, dtype: DataType, value: f64) {
    match dtype {
        DataType::Fp32 => out.extend((value as f32).to_le_bytes()),
        DataType::Fp64 => out.extend(value.to_le_bytes()),
        DataType::Fp16 => out.extend(half::f16::from_f64(value).to_le_bytes()),
        _ => out.extend(half::bf16::from_f64(value).to_le_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // That the bytes are the general path's is tested beside the general path
    // (`tensor_data::tests::fast_path`); here, what the reader takes and declines.

    #[test]
    fn takes_nested_arrays_of_numbers() {
        let (bytes, count) = decode(" [ [1.5] , [2,-0.25e1] , [ ] ] ", DataType::Fp32).unwrap();
        assert_eq!(count, 3);
        let expected: Vec<u8> = [1.5f32, 2.0, -2.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(bytes, expected);
        assert_eq!(
            decode("7", DataType::Fp64),
            Some((7f64.to_le_bytes().to_vec(), 1))
        );
        assert_eq!(decode("[]", DataType::Fp64), Some((Vec::new(), 0)));
        // `-0` is RapidJSON's integer 0; `-0.0` is negative zero.
        let (zeros, _) = decode("[-0, -0.0]", DataType::Fp64).unwrap();
        assert_eq!(zeros[..8], 0f64.to_le_bytes());
        assert_eq!(zeros[8..], (-0f64).to_le_bytes());
        // Non-finite numbers, as Triton's frontend reads them (and writes them).
        let (bytes, count) = decode(
            "[NaN, -NaN, Infinity, -Infinity, Inf, -Inf]",
            DataType::Fp64,
        )
        .unwrap();
        assert_eq!(count, 6);
        let values: Vec<f64> = bytes
            .chunks(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert!(values[0].is_nan() && values[1].is_nan());
        assert_eq!(
            values[2..],
            [
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::INFINITY,
                f64::NEG_INFINITY
            ]
        );
        // Past the double range but within RapidJSON's bound: infinity, as Triton reads it.
        assert_eq!(
            decode("[9e308]", DataType::Fp64),
            Some((f64::INFINITY.to_le_bytes().to_vec(), 1))
        );
    }

    #[test]
    fn declines_anything_else() {
        for raw in [
            "[1,,2]",
            "[1 2]",
            "[1,]",
            "[,1]",
            "[01]",
            "[+1]",
            "[.5]",
            "[5.]",
            "[1e]",
            "[1e+]",
            "[-]",
            "[Na]",
            "[nan]",
            "[Infinit]",
            "[-Infinityy]",
            "[+Inf]",
            "[\"1\"]",
            "[null]",
            "[true]",
            "[{}]",
            "[1]]",
            "[[1]",
            "1 2",
            "",
            " ",
            "[1] x",
            "[1e400]",
            "[-1e400]",
            "[0e400]",
        ] {
            assert_eq!(decode(raw, DataType::Fp32), None, "{raw}");
        }
        let deep = format!("{}1{}", "[".repeat(101), "]".repeat(101));
        assert_eq!(decode(&deep, DataType::Fp32), None);
        assert_eq!(decode("[1]", DataType::Int32), None);
    }
}

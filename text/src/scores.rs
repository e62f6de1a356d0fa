//! A Unigram tokenizer's scores, read as Hugging Face's own builds read them.
//!
//! `tokenizers` parses a `tokenizer.json` with serde_json. Its default build, and so the Python
//! library, parses a float by converting the decimal significand to an `f64` and then
//! multiplying or dividing by a power of ten. That rounds twice, and the result is one unit in
//! the last place off the nearest double for about one score in six of a trained Unigram
//! vocabulary. trident's server enables serde_json's `float_roundtrip` (its tensors' FP64
//! values must parse exactly), and Cargo gives every crate in one binary the same features. So
//! the host read the scores exactly, and where two segmentations of a word tie to the last bit
//! (`0` then `00`, or `00` then `0`), it chose the other one. Python, the tokenize plugin in
//! its sandbox and the host then disagreed on a few ids in thousands of lines.
//!
//! [`as_tokenizers_reads_them`] rewrites each score that this build would read differently into
//! the shortest text of the double the default build reads, so that every build ends with the
//! same scores. A build that already reads them that way, the plugins' own, gets the file back
//! unchanged.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::value::RawValue;

/// The powers of ten as serde_json's default build keeps them: the nearest doubles to
/// `1e0` ..= `1e308`.
fn pow10(exponent: usize) -> f64 {
    format!("1e{exponent}").parse().unwrap_or(f64::INFINITY)
}

/// `number`, a JSON number's text, as serde_json parses it without `float_roundtrip`: the
/// digits that fit a `u64` make the significand (integer digits past them raise the exponent,
/// fraction digits past them are dropped), and the significand as an `f64` is then multiplied
/// or divided by a power of ten, in steps of `1e308` past the table. `None` for text that is
/// not a JSON number, or one that build refuses as out of range.
pub fn default_build_f64(number: &str) -> Option<f64> {
    let (positive, digits) = match number.strip_prefix('-') {
        Some(rest) => (false, rest),
        None => (true, number),
    };
    let (mantissa, exponent_text) = match digits.find(['e', 'E']) {
        Some(at) => (&digits[..at], Some(&digits[at + 1..])),
        None => (digits, None),
    };
    let (integer, fraction) = match mantissa.split_once('.') {
        Some((integer, fraction)) => (integer, Some(fraction)),
        None => (mantissa, None),
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(integer) || fraction.is_some_and(|f| !all_digits(f)) {
        return None;
    }
    let mut significand: u64 = 0;
    let mut exponent: i64 = 0;
    let mut overflowed = false;
    for digit in integer.bytes().map(|b| u64::from(b - b'0')) {
        match (!overflowed)
            .then(|| significand.checked_mul(10)?.checked_add(digit))
            .flatten()
        {
            Some(next) => significand = next,
            None => {
                overflowed = true;
                exponent += 1;
            }
        }
    }
    for digit in fraction.unwrap_or("").bytes().map(|b| u64::from(b - b'0')) {
        match (!overflowed)
            .then(|| significand.checked_mul(10)?.checked_add(digit))
            .flatten()
        {
            Some(next) => {
                significand = next;
                exponent -= 1;
            }
            None => overflowed = true,
        }
    }
    if let Some(text) = exponent_text {
        let (sign, digits) = match text.as_bytes().first() {
            Some(b'-') => (-1, &text[1..]),
            Some(b'+') => (1, &text[1..]),
            _ => (1, text),
        };
        if !all_digits(digits) {
            return None;
        }
        // An exponent past i32 is refused (or, negative, makes zero) by that build too.
        let value: i32 = digits.parse().ok()?;
        exponent += i64::from(sign) * i64::from(value);
    }
    let mut exponent = i32::try_from(exponent).ok()?;
    let mut value = significand as f64;
    loop {
        let power = exponent.unsigned_abs() as usize;
        if power <= 308 {
            if exponent >= 0 {
                value *= pow10(power);
                if value.is_infinite() {
                    return None;
                }
            } else {
                value /= pow10(power);
            }
            break;
        }
        if value == 0.0 {
            break;
        }
        if exponent >= 0 {
            return None;
        }
        value /= 1e308;
        exponent += 308;
    }
    Some(if positive { value } else { -value })
}

/// `json` with each Unigram score this build would read otherwise than `tokenizers`' default
/// build written as the double that build reads; the file itself when there is none (another
/// model, or a build that reads them alike). Malformed files are left to `tokenizers` to refuse.
pub fn as_tokenizers_reads_them(json: &[u8]) -> Cow<'_, [u8]> {
    let Some(scores) = unigram_scores(json) else {
        return Cow::Borrowed(json);
    };
    let mut rewritten: Vec<u8> = Vec::new();
    let mut copied = 0;
    for score in scores {
        let text = score.get();
        let Some(wanted) = default_build_f64(text) else {
            continue;
        };
        if serde_json::from_str::<f64>(text).ok() == Some(wanted) {
            continue;
        }
        let replacement = format!("{wanted:?}");
        if serde_json::from_str::<f64>(&replacement).ok() != Some(wanted) {
            continue;
        }
        // The raw value borrows from `json`: its place in it is where its text starts.
        let start = text.as_ptr() as usize - json.as_ptr() as usize;
        rewritten.extend_from_slice(&json[copied..start]);
        rewritten.extend_from_slice(replacement.as_bytes());
        copied = start + text.len();
    }
    if copied == 0 {
        return Cow::Borrowed(json);
    }
    rewritten.extend_from_slice(&json[copied..]);
    Cow::Owned(rewritten)
}

/// The score texts of a Unigram model's vocabulary (`model.vocab`: `[[piece, score], ...]`), in
/// file order, borrowed from `json`; `None` for any other model or a file of another shape.
fn unigram_scores(json: &[u8]) -> Option<Vec<&RawValue>> {
    type Object<'a> = HashMap<String, &'a RawValue>;
    let file: Object = serde_json::from_slice(json).ok()?;
    let model: Object = serde_json::from_str(file.get("model")?.get()).ok()?;
    if serde_json::from_str::<String>(model.get("type")?.get()).ok()? != "Unigram" {
        return None;
    }
    let vocab: Vec<(&RawValue, &RawValue)> =
        serde_json::from_str(model.get("vocab")?.get()).ok()?;
    Some(vocab.into_iter().map(|(_, score)| score).collect())
}

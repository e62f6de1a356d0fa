//! Triton's wording for a request body that is not JSON: its frontend parses with RapidJSON and
//! answers `failed to parse the request JSON buffer: <RapidJSON's message> at <byte offset>`, and
//! clients (NVIDIA's own SageMaker QA among them) check that text. trident parses with serde;
//! when serde refuses a body, this scanner finds the error RapidJSON (1.1, with the
//! `kParseNanAndInfFlag` Triton's JSON wrapper parses with: `NaN` and `Infinity` are numbers)
//! would report, with its message and offset. It runs only on bodies already refused, so it costs
//! nothing on the good path, and it is iterative, so no depth of nesting can exhaust the stack.

/// A syntax error as RapidJSON reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntaxError {
    /// RapidJSON's English message (`GetParseError_En`).
    pub message: &'static str,
    /// The byte offset RapidJSON reports (`GetErrorOffset`).
    pub offset: usize,
}

const DOCUMENT_EMPTY: &str = "The document is empty.";
const ROOT_NOT_SINGULAR: &str = "The document root must not be followed by other values.";
const VALUE_INVALID: &str = "Invalid value.";
const OBJECT_MISS_NAME: &str = "Missing a name for object member.";
const OBJECT_MISS_COLON: &str = "Missing a colon after a name of object member.";
const OBJECT_MISS_COMMA: &str = "Missing a comma or '}' after an object member.";
const ARRAY_MISS_COMMA: &str = "Missing a comma or ']' after an array element.";
const INVALID_HEX: &str = "Incorrect hex digit after \\u escape in string.";
const SURROGATE_INVALID: &str = "The surrogate pair in string is invalid.";
const ESCAPE_INVALID: &str = "Invalid escape character in string.";
const MISS_QUOTATION_MARK: &str = "Missing a closing quotation mark in string.";
const INVALID_ENCODING: &str = "Invalid encoding in string.";
const NUMBER_TOO_BIG: &str = "Number too big to be stored in double.";
const MISS_FRACTION: &str = "Miss fraction part in number.";
const MISS_EXPONENT: &str = "Miss exponent in number.";

/// A non-finite number as Triton's frontend reads it (RapidJSON's `kParseNanAndInfFlag`, which
/// its JSON wrapper parses with, as Python's `json.dumps` writes them): `NaN`, `Inf` or
/// `Infinity`, each with an optional `-`, at `start` in `input`. `Ok` with the offset past it and
/// its value (`-NaN` is NaN); `Err` with RapidJSON's error offset when the text there starts as
/// one and is not (`Na`, `Infinit`), which RapidJSON refuses as an invalid value.
pub fn nan_or_infinity(input: &[u8], start: usize) -> Result<(usize, f64), usize> {
    let negative = input.get(start) == Some(&b'-');
    let at = start + usize::from(negative);
    let word = |word: &[u8]| -> Result<usize, usize> {
        for (i, &byte) in word.iter().enumerate() {
            if input.get(at + i) != Some(&byte) {
                return Err(at + i);
            }
        }
        Ok(at + word.len())
    };
    match input.get(at) {
        Some(b'N') => word(b"NaN").map(|end| (end, f64::NAN)),
        Some(b'I') => {
            let mut end = word(b"Inf")?;
            if input.get(end) == Some(&b'i') {
                end = word(b"Infinity")?;
            }
            let value = if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
            Ok((end, value))
        }
        _ => Err(at),
    }
}

/// Why serde refused `body`: in Triton's words whenever RapidJSON would refuse the body too
/// (whatever serde's first complaint was: `[1,2` fails serde's types before its syntax);
/// otherwise (the JSON does not have the expected shape) `prefix: <serde's message>`.
pub fn refusal(body: &[u8], error: &serde_json::Error, prefix: &str) -> String {
    rapidjson_message(body).unwrap_or_else(|| format!("{prefix}: {error}"))
}

/// `failed to parse the request JSON buffer: <message> at <offset>` when `body` is not JSON
/// (by RapidJSON's rules); `None` when it is, and serde refused it for another reason.
pub fn rapidjson_message(body: &[u8]) -> Option<String> {
    let error = syntax_error(body)?;
    Some(format!(
        "failed to parse the request JSON buffer: {} at {}",
        error.message, error.offset
    ))
}

/// The syntax error RapidJSON finds in `input`, or `None` for a well-formed document. As in
/// RapidJSON reading a buffer of known length, a NUL byte reads as the end of the input.
pub fn syntax_error(input: &[u8]) -> Option<SyntaxError> {
    Scanner { input, at: 0 }.document().err()
}

struct Scanner<'a> {
    input: &'a [u8],
    at: usize,
}

type Scan = Result<(), SyntaxError>;

impl Scanner<'_> {
    fn peek(&self) -> u8 {
        self.input.get(self.at).copied().unwrap_or(0)
    }

    fn fail(&self, message: &'static str) -> Scan {
        self.fail_at(message, self.at)
    }

    fn fail_at(&self, message: &'static str, offset: usize) -> Scan {
        Err(SyntaxError { message, offset })
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), b' ' | b'\n' | b'\r' | b'\t') {
            self.at += 1;
        }
    }

    fn document(&mut self) -> Scan {
        self.skip_whitespace();
        if self.peek() == 0 {
            return self.fail(DOCUMENT_EMPTY);
        }
        self.value()?;
        self.skip_whitespace();
        if self.peek() != 0 {
            return self.fail(ROOT_NOT_SINGULAR);
        }
        Ok(())
    }

    /// One value, containers included, with an explicit stack of the open containers.
    fn value(&mut self) -> Scan {
        let mut open: Vec<u8> = Vec::new();
        'value: loop {
            match self.peek() {
                b'n' => self.literal(b"null")?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'"' => self.string()?,
                b'{' => {
                    self.at += 1;
                    self.skip_whitespace();
                    if self.peek() == b'}' {
                        self.at += 1;
                    } else {
                        self.member_name()?;
                        open.push(b'{');
                        continue 'value;
                    }
                }
                b'[' => {
                    self.at += 1;
                    self.skip_whitespace();
                    if self.peek() == b']' {
                        self.at += 1;
                    } else {
                        open.push(b'[');
                        continue 'value;
                    }
                }
                _ => self.number()?,
            }
            // A value ended: the containers it closes, then the next value of an open one.
            while let Some(&container) = open.last() {
                self.skip_whitespace();
                match (container, self.peek()) {
                    (b'{', b',') => {
                        self.at += 1;
                        self.skip_whitespace();
                        self.member_name()?;
                        continue 'value;
                    }
                    (b'[', b',') => {
                        self.at += 1;
                        self.skip_whitespace();
                        continue 'value;
                    }
                    (b'{', b'}') | (b'[', b']') => {
                        self.at += 1;
                        open.pop();
                    }
                    (b'{', _) => return self.fail(OBJECT_MISS_COMMA),
                    _ => return self.fail(ARRAY_MISS_COMMA),
                }
            }
            return Ok(());
        }
    }

    /// A member's name and colon, up to its value.
    fn member_name(&mut self) -> Scan {
        if self.peek() != b'"' {
            return self.fail(OBJECT_MISS_NAME);
        }
        self.string()?;
        self.skip_whitespace();
        if self.peek() != b':' {
            return self.fail(OBJECT_MISS_COLON);
        }
        self.at += 1;
        self.skip_whitespace();
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Scan {
        self.at += 1;
        for &expected in &word[1..] {
            if self.peek() != expected {
                return self.fail(VALUE_INVALID);
            }
            self.at += 1;
        }
        Ok(())
    }

    fn digits(&mut self) {
        while self.peek().is_ascii_digit() {
            self.at += 1;
        }
    }

    fn number(&mut self) -> Scan {
        let start = self.at;
        if self.peek() == b'-' {
            self.at += 1;
        }
        match self.peek() {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            b'N' | b'I' => {
                return match nan_or_infinity(self.input, start) {
                    Ok((end, _)) => {
                        self.at = end;
                        Ok(())
                    }
                    Err(at) => self.fail_at(VALUE_INVALID, at),
                };
            }
            _ => return self.fail(VALUE_INVALID),
        }
        if self.peek() == b'.' {
            self.at += 1;
            if !self.peek().is_ascii_digit() {
                return self.fail(MISS_FRACTION);
            }
            self.digits();
        }
        if matches!(self.peek(), b'e' | b'E') {
            self.at += 1;
            if matches!(self.peek(), b'+' | b'-') {
                self.at += 1;
            }
            if !self.peek().is_ascii_digit() {
                return self.fail(MISS_EXPONENT);
            }
            self.digits();
        }
        if number_too_big(&self.input[start..self.at]) {
            return self.fail_at(NUMBER_TOO_BIG, start);
        }
        Ok(())
    }

    fn string(&mut self) -> Scan {
        self.at += 1;
        loop {
            match self.peek() {
                b'\\' => {
                    let escape = self.at;
                    self.at += 1;
                    match self.peek() {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 1,
                        b'u' => {
                            self.at += 1;
                            let code = self.hex4(escape)?;
                            if (0xD800..=0xDBFF).contains(&code) {
                                if self.peek() != b'\\' {
                                    return self.fail_at(SURROGATE_INVALID, escape);
                                }
                                self.at += 1;
                                if self.peek() != b'u' {
                                    return self.fail_at(SURROGATE_INVALID, escape);
                                }
                                self.at += 1;
                                let low = self.hex4(escape)?;
                                if !(0xDC00..=0xDFFF).contains(&low) {
                                    return self.fail_at(SURROGATE_INVALID, escape);
                                }
                            }
                        }
                        _ => return self.fail_at(ESCAPE_INVALID, escape),
                    }
                }
                b'"' => {
                    self.at += 1;
                    return Ok(());
                }
                0 => return self.fail(MISS_QUOTATION_MARK),
                0x01..=0x1F => return self.fail(INVALID_ENCODING),
                _ => self.at += 1,
            }
        }
    }

    /// Four hex digits of a `\u` escape (starting at `escape`); their value.
    fn hex4(&mut self, escape: usize) -> Result<u32, SyntaxError> {
        let mut code = 0;
        for _ in 0..4 {
            let digit = (self.peek() as char).to_digit(16);
            let Some(digit) = digit else {
                return Err(SyntaxError {
                    message: INVALID_HEX,
                    offset: escape,
                });
            };
            code = code * 16 + digit;
            self.at += 1;
        }
        Ok(code)
    }
}

/// Whether RapidJSON 1.1 (default flags, 64-bit) refuses the well-formed JSON number `token`
/// as "Number too big to be stored in double.". Its rule is not the double range: it refuses an
/// integer part once the double it accumulates reaches `DBL_MAX / 10` before the next digit, and
/// a positive exponent above `308` plus the fraction digits it counted (so `0e400` is refused
/// though it is zero), and it takes `9e308` (read as infinity). Seen on Triton 2.51's frontend.
pub fn number_too_big(token: &[u8]) -> bool {
    let (minus, rest) = match token.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, token),
    };
    let int_len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let (int, mut rest) = rest.split_at(int_len);
    let Some(integer) = Significand::of_integer(int, minus) else {
        return true;
    };
    let mut exp_frac: i64 = 0;
    if let Some((b'.', fraction)) = rest.split_first() {
        let digits = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
        exp_frac = integer.fraction_exponent(&fraction[..digits]);
        rest = &fraction[digits..];
    }
    let Some((b'e' | b'E', exponent)) = rest.split_first() else {
        return false;
    };
    let exponent = match exponent.split_first() {
        Some((b'-', _)) => return false,
        Some((b'+', digits)) => digits,
        _ => exponent,
    };
    let max = 308 - exp_frac;
    let mut value: i64 = 0;
    for (index, digit) in exponent
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .enumerate()
    {
        value = value * 10 + i64::from(digit - b'0');
        // RapidJSON checks from the second digit on; the first cannot exceed 308.
        if index > 0 && value > max {
            return true;
        }
    }
    false
}

/// RapidJSON's integer part: as `u32`, then `u64`, then a double; and how many significant
/// digits it counted (which decides how many fraction digits move the exponent).
struct Significand {
    /// The integer while it fits `u64` (`None` once RapidJSON went on in a double).
    exact: Option<u64>,
    digits: u32,
}

impl Significand {
    /// The integer part's digits; `None` when RapidJSON refuses them as too big.
    fn of_integer(int: &[u8], minus: bool) -> Option<Significand> {
        let (limit32, last32, limit64, last64) = if minus {
            (214_748_364, b'8', 0x0CCC_CCCC_CCCC_CCCC, b'8')
        } else {
            (429_496_729, b'5', 0x1999_9999_9999_9999, b'5')
        };
        let Some((&first, rest)) = int.split_first() else {
            return Some(Significand {
                exact: Some(0),
                digits: 0,
            });
        };
        let mut value = u64::from(first - b'0');
        let (mut digits, mut wide, mut double) = (0u32, false, None::<f64>);
        for &c in rest {
            let digit = u64::from(c - b'0');
            if !wide && value >= limit32 && (value != limit32 || c > last32) {
                wide = true;
            }
            if wide && double.is_none() && value >= limit64 && (value != limit64 || c > last64) {
                double = Some(value as f64);
            }
            match &mut double {
                Some(d) => {
                    if *d >= 1.797_693_134_862_315_7e307 {
                        return None;
                    }
                    *d = *d * 10.0 + digit as f64;
                }
                None => {
                    value = value * 10 + digit;
                    digits += 1;
                }
            }
        }
        Some(Significand {
            exact: double.is_none().then_some(value),
            digits,
        })
    }

    /// The (negative) exponent RapidJSON gives the fraction `digits`: one less per digit while
    /// it keeps them (up to 2^53 in a `u64`, then 17 significant digits in a double).
    fn fraction_exponent(&self, fraction: &[u8]) -> i64 {
        let (mut exp_frac, mut significant) = (0i64, self.digits);
        let mut rest = fraction;
        let mut nonzero = self.exact != Some(0);
        if let Some(mut value) = self.exact {
            while let Some((&c, tail)) = rest.split_first() {
                if value > (1 << 53) - 1 {
                    break;
                }
                value = value * 10 + u64::from(c - b'0');
                exp_frac -= 1;
                significant += u32::from(value != 0);
                rest = tail;
            }
            nonzero = value != 0;
        }
        for &c in rest {
            if significant < 17 {
                exp_frac -= 1;
                nonzero |= c != b'0';
                significant += u32::from(nonzero);
            }
        }
        exp_frac
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(input: &str) -> Option<(&'static str, usize)> {
        syntax_error(input.as_bytes()).map(|e| (e.message, e.offset))
    }

    #[test]
    fn well_formed_documents_pass() {
        for good in [
            "{}",
            " [ ] ",
            r#"{"a":[1,-2.5e+3,0,true,false,null,"x\u00e9\ud83d\ude00\n"],"b":{}}"#,
            "\"caf\u{e9}\"",
            "0",
            "{}\0trailing after a NUL",
            "[NaN,-NaN,Inf,-Inf,Infinity,-Infinity]",
        ] {
            assert_eq!(error(good), None, "{good}");
        }
    }

    /// Triton's answers as seen on 2.51, and RapidJSON's offsets for each kind of error.
    #[test]
    fn errors_are_rapidjsons() {
        assert_eq!(error(&"A".repeat(65_536)), Some((VALUE_INVALID, 0)));
        assert_eq!(error(r#"{"inputs":[{"name":"#), Some((VALUE_INVALID, 19)));
        assert_eq!(error(""), Some((DOCUMENT_EMPTY, 0)));
        assert_eq!(error("  \n"), Some((DOCUMENT_EMPTY, 3)));
        assert_eq!(error("{} x"), Some((ROOT_NOT_SINGULAR, 3)));
        assert_eq!(error("01"), Some((ROOT_NOT_SINGULAR, 1)));
        assert_eq!(error("{a:1}"), Some((OBJECT_MISS_NAME, 1)));
        assert_eq!(error(r#"{"a":1,}"#), Some((OBJECT_MISS_NAME, 7)));
        assert_eq!(error(r#"{"a" 1}"#), Some((OBJECT_MISS_COLON, 5)));
        assert_eq!(error(r#"{"a":1 "b":2}"#), Some((OBJECT_MISS_COMMA, 7)));
        assert_eq!(error("[1 2]"), Some((ARRAY_MISS_COMMA, 3)));
        assert_eq!(error("[1,]"), Some((VALUE_INVALID, 3)));
        assert_eq!(error("nul"), Some((VALUE_INVALID, 3)));
        assert_eq!(error("-x"), Some((VALUE_INVALID, 1)));
        assert_eq!(error("[Na]"), Some((VALUE_INVALID, 3)));
        assert_eq!(error("[Infin]"), Some((VALUE_INVALID, 6)));
        assert_eq!(error("[-I]"), Some((VALUE_INVALID, 3)));
        assert_eq!(error("[Infinity1]"), Some((ARRAY_MISS_COMMA, 9)));
        assert_eq!(error("1."), Some((MISS_FRACTION, 2)));
        assert_eq!(error("1e+"), Some((MISS_EXPONENT, 3)));
        assert_eq!(error("[1e400]"), Some((NUMBER_TOO_BIG, 1)));
        assert_eq!(error("[-0e400]"), Some((NUMBER_TOO_BIG, 1)));
        assert_eq!(error(r#"["\uABCG"]"#), Some((INVALID_HEX, 2)));
        assert_eq!(error(r#"["\uD800X"]"#), Some((SURROGATE_INVALID, 2)));
        assert_eq!(error(r#"["\uD800\uFFFF"]"#), Some((SURROGATE_INVALID, 2)));
        assert_eq!(error(r#"["\a"]"#), Some((ESCAPE_INVALID, 2)));
        assert_eq!(error(r#"["Test]"#), Some((MISS_QUOTATION_MARK, 7)));
        assert_eq!(error("[\"a\u{1}\"]"), Some((INVALID_ENCODING, 3)));
    }

    #[test]
    fn deep_nesting_is_scanned_without_recursion() {
        let deep = "[".repeat(1_000_000);
        assert_eq!(error(&deep), Some((VALUE_INVALID, 1_000_000)));
        assert_eq!(
            rapidjson_message(b"AAAA").as_deref(),
            Some("failed to parse the request JSON buffer: Invalid value. at 0")
        );
    }

    /// RapidJSON 1.1's bound on numbers, as Triton 2.51's frontend answered each (`true`:
    /// "Number too big to be stored in double.").
    #[test]
    fn numbers_too_big_are_rapidjsons() {
        let too_big = |text: &str| number_too_big(text.as_bytes());
        for (number, refused) in [
            ("0", false),
            ("0e308", false),
            ("0e309", true),
            ("0e400", true),
            ("-0e400", true),
            ("1e308", false),
            ("9e308", false),
            ("1.5e308", false),
            ("1.0e309", false),
            ("0.1e309", false),
            ("0.1e310", true),
            ("0.01e310", false),
            ("0.00e310", false),
            ("1e-400", false),
            ("1e-99999999999", false),
            ("17976931348623157e292", false),
            ("0.00000000000000000001e328", false),
            ("0.000000000000000000001e329", false),
            ("1.7976931348623157e308", false),
            ("18446744073709551615", false),
            ("-9223372036854775809", false),
        ] {
            assert_eq!(too_big(number), refused, "{number}");
        }
        let digits = |head: &str, zeros: usize| format!("{head}{}", "0".repeat(zeros));
        assert!(!too_big(&digits("1", 308)));
        assert!(too_big(&digits("1", 309)));
        assert!(too_big(&digits("2", 308)));
        assert!(!too_big(&digits("111111111111111111", 291)));
        assert!(too_big(&digits("-2", 308)));
    }
}

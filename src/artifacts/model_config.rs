//! The few fields of a Triton model configuration (`config.pbtxt`, protobuf text format) that
//! the artifact rules look at, read with a small tokenizer of the text format: comments,
//! single- and double-quoted strings with their escapes, adjacent strings joined, as the core's
//! own parser reads them (so `backend: "py" 'thon'` or `"\x70ython"` is `python` here too).

use std::collections::BTreeMap;

/// What the rules read from one configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelConfigFacts {
    /// The top-level `backend`, when set.
    pub backend: Option<String>,
    /// The top-level `platform`, when set.
    pub platform: Option<String>,
    /// The top-level `runtime` (the backend's library or script), when set.
    pub runtime: Option<String>,
    /// Every `parameters` entry: its `key` and `string_value`.
    pub parameters: BTreeMap<String, String>,
    /// Every `op_library_filename` (custom operation libraries the backend loads).
    pub op_libraries: Vec<String>,
}

/// A token of the text format.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A field name, number or enum value.
    Word(String),
    /// A string literal, unescaped (adjacent literals joined).
    Text(String),
    /// `{ } [ ] < > : , ;`
    Mark(char),
}

/// Reads `text`; an error says why it cannot be read (the core would refuse it too, but an
/// artifact the rules cannot read is not let through on that hope).
pub fn parse(text: &str) -> Result<ModelConfigFacts, String> {
    let tokens = tokenize(text)?;
    let mut facts = ModelConfigFacts::default();
    let mut depth = 0usize;
    let mut key: Option<String> = None;
    for (index, token) in tokens.iter().enumerate() {
        match token {
            Token::Mark('{' | '[' | '<') => depth += 1,
            Token::Mark('}' | ']' | '>') => depth = depth.saturating_sub(1),
            Token::Word(field) => {
                let Some(value) = value_of(&tokens, index) else {
                    continue;
                };
                match (depth, field.as_str()) {
                    (0, "backend") => facts.backend = Some(value),
                    (0, "platform") => facts.platform = Some(value),
                    (0, "runtime") => facts.runtime = Some(value),
                    (_, "key") => key = Some(value),
                    (_, "string_value") => {
                        if let Some(key) = key.take() {
                            facts.parameters.insert(key, value);
                        }
                    }
                    (_, "op_library_filename") => facts.op_libraries.push(value),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    Ok(facts)
}

/// The string after `field :` at `index`, if that is what follows.
fn value_of(tokens: &[Token], index: usize) -> Option<String> {
    match (tokens.get(index + 1), tokens.get(index + 2)) {
        (Some(Token::Mark(':')), Some(Token::Text(value))) => Some(value.clone()),
        _ => None,
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '#' {
            while chars.next_if(|&c| c != '\n').is_some() {}
        } else if c == '"' || c == '\'' {
            chars.next();
            let literal = string_literal(&mut chars, c)?;
            match tokens.last_mut() {
                Some(Token::Text(previous)) => previous.push_str(&literal),
                _ => tokens.push(Token::Text(literal)),
            }
        } else if "{}[]<>:,;".contains(c) {
            chars.next();
            tokens.push(Token::Mark(c));
        } else if c.is_alphanumeric() || "_.-+".contains(c) {
            let mut word = String::new();
            while let Some(c) = chars.next_if(|&c| c.is_alphanumeric() || "_.-+".contains(c)) {
                word.push(c);
            }
            tokens.push(Token::Word(word));
        } else {
            return Err(format!("unexpected character {c:?}"));
        }
    }
    Ok(tokens)
}

/// A literal's text up to its closing `quote`, escapes resolved.
fn string_literal(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    quote: char,
) -> Result<String, String> {
    let mut bytes = Vec::new();
    loop {
        let c = chars.next().ok_or("a string is not closed")?;
        if c == quote {
            break;
        }
        if c == '\n' {
            return Err("a string runs past the end of its line".into());
        }
        if c != '\\' {
            let mut buffer = [0; 4];
            bytes.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
            continue;
        }
        let escaped = chars.next().ok_or("a string ends in an escape")?;
        let byte = match escaped {
            'n' => b'\n',
            't' => b'\t',
            'r' => b'\r',
            'a' => 0x07,
            'b' => 0x08,
            'f' => 0x0c,
            'v' => 0x0b,
            '\\' | '\'' | '"' | '?' => escaped as u8,
            'x' | 'X' => match digits(chars, 16, 2, 0) {
                (_, 0) => return Err("a \\x escape has no digits".into()),
                (value, _) => u8::try_from(value).map_err(|_| "an escape is out of range")?,
            },
            '0'..='7' => {
                let first = escaped.to_digit(8).unwrap_or(0);
                let (value, _) = digits(chars, 8, 2, first);
                u8::try_from(value).map_err(|_| "an octal escape is out of range")?
            }
            other => return Err(format!("unknown escape \\{other}")),
        };
        bytes.push(byte);
    }
    String::from_utf8(bytes).map_err(|_| "a string is not UTF-8".into())
}

/// Reads up to `max` more digits of `radix` onto `value`; returns the value and how many
/// digits were read.
fn digits(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    radix: u32,
    max: usize,
    mut value: u32,
) -> (u32, usize) {
    let mut count = 0;
    while count < max
        && let Some(digit) = chars.peek().and_then(|c| c.to_digit(radix))
    {
        chars.next();
        value = value * radix + digit;
        count += 1;
    }
    (value, count)
}

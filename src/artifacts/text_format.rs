//! Protocol buffers' text format, as the Triton core reads a `config.pbtxt`: parsed into a
//! tree without a schema ([`parse`]), and written back in one canonical form
//! ([`Message::write`]) that the core reads as the same message.
//!
//! What the reader accepts is what protobuf's own text parser accepts for a message without
//! extensions: `#` comments (any bytes up to the end of the line, so a Latin-1 comment is
//! read), fields separated by nothing, `,` or `;`, a message written `name { … }`,
//! `name: { … }` or with `< … >`, a repeated field written once per value or as a list
//! `name: [a, b]`, single- and double-quoted strings with C escapes and `\u`/`\U` escapes,
//! adjacent strings joined. Numbers, enum values and `true`/`false` are kept as the words they
//! are written as. A field order, a spacing or an escape therefore never hides a value from
//! trident that the core reads.

use std::fmt::Write as _;

/// The deepest nesting read (protobuf's text parser stops at 100 too).
pub const MAX_NESTING: usize = 100;
/// The most tokens a configuration may hold: a real one has a few thousand; past this the
/// check's own memory (a few tens of bytes a token) would no longer be a small multiple of the
/// file's bytes.
pub const MAX_TOKENS: usize = 200_000;

/// A message: its fields in the order written (a repeated field appears once per value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// The fields.
    pub fields: Vec<Field>,
}

/// One field and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field's name.
    pub name: String,
    /// Its value.
    pub value: Value,
}

/// A field's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A number, an enum value or a boolean, as written.
    Word(String),
    /// A string, its escapes resolved.
    Text(String),
    /// A message.
    Message(Message),
}

impl Message {
    /// The values of every field named `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.fields
            .iter()
            .filter(move |f| f.name == name)
            .map(|f| &f.value)
    }

    /// The message values of every field named `name`.
    pub fn messages<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Message> + 'a {
        self.all(name).filter_map(|value| match value {
            Value::Message(message) => Some(message),
            _ => None,
        })
    }

    /// The string values of every field named `name`.
    pub fn texts<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.all(name).filter_map(|value| match value {
            Value::Text(text) => Some(text.as_str()),
            _ => None,
        })
    }

    /// The last value of `name` (the one the core keeps for a field that is not repeated).
    pub fn last(&self, name: &str) -> Option<&Value> {
        self.fields
            .iter()
            .rev()
            .find(|f| f.name == name)
            .map(|f| &f.value)
    }

    /// The last string value of `name`.
    pub fn text(&self, name: &str) -> Option<&str> {
        match self.last(name)? {
            Value::Text(text) => Some(text),
            _ => None,
        }
    }

    /// The last message value of `name`.
    pub fn message(&self, name: &str) -> Option<&Message> {
        match self.last(name)? {
            Value::Message(message) => Some(message),
            _ => None,
        }
    }

    /// The last message value of `name`, to change.
    pub fn message_mut(&mut self, name: &str) -> Option<&mut Message> {
        self.fields
            .iter_mut()
            .rev()
            .find(|f| f.name == name)
            .and_then(|f| match &mut f.value {
                Value::Message(message) => Some(message),
                _ => None,
            })
    }

    /// The message values of every field named `name`, to change.
    pub fn messages_mut<'a>(
        &'a mut self,
        name: &'a str,
    ) -> impl Iterator<Item = &'a mut Message> + 'a {
        self.fields
            .iter_mut()
            .filter(move |f| f.name == name)
            .filter_map(|f| match &mut f.value {
                Value::Message(message) => Some(message),
                _ => None,
            })
    }

    /// Whether a field `name` is written.
    pub fn has(&self, name: &str) -> bool {
        self.fields.iter().any(|f| f.name == name)
    }

    /// Sets the single field `name` to `value`: every earlier value of it is removed.
    pub fn set(&mut self, name: &str, value: Value) {
        self.fields.retain(|f| f.name != name);
        self.fields.push(Field {
            name: name.to_owned(),
            value,
        });
    }

    /// The message in the text format, one field a line, strings escaped so that any text
    /// reads back as itself.
    pub fn write(&self) -> String {
        let mut out = String::new();
        self.write_into(&mut out, 0);
        out
    }

    fn write_into(&self, out: &mut String, indent: usize) {
        for field in &self.fields {
            out.extend(std::iter::repeat_n(' ', indent));
            out.push_str(&field.name);
            match &field.value {
                Value::Word(word) => {
                    out.push_str(": ");
                    out.push_str(word);
                }
                Value::Text(text) => {
                    out.push_str(": ");
                    write_string(out, text);
                }
                Value::Message(message) => {
                    out.push_str(" {\n");
                    message.write_into(out, indent + 2);
                    out.extend(std::iter::repeat_n(' ', indent));
                    out.push('}');
                }
            }
            out.push('\n');
        }
    }
}

/// `text` as a double-quoted literal: quotes, backslashes and control characters escaped in
/// octal; every other character as itself (UTF-8, as the core reads it).
fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() && c.is_ascii() => {
                let _ = write!(out, "\\{:03o}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Why a configuration cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct ParseError {
    /// The line (from 1).
    pub line: usize,
    /// What is wrong.
    pub why: String,
}

/// Reads a message from `bytes`.
pub fn parse(bytes: &[u8]) -> Result<Message, ParseError> {
    let tokens = tokenize(bytes)?;
    let mut parser = Parser { tokens, at: 0 };
    let message = parser.message(None, 0)?;
    Ok(message)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Text(String),
    Mark(u8),
}

struct Parser {
    tokens: Vec<(Token, usize)>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(token, _)| token)
    }

    fn line(&self) -> usize {
        self.tokens
            .get(self.at)
            .or(self.tokens.last())
            .map_or(1, |(_, line)| *line)
    }

    fn error<T>(&self, why: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError {
            line: self.line(),
            why: why.into(),
        })
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).map(|(token, _)| token.clone());
        self.at += 1;
        token
    }

    fn eat(&mut self, mark: u8) -> bool {
        if self.peek() == Some(&Token::Mark(mark)) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// Fields up to `close` (or the end of the text, at the top).
    fn message(&mut self, close: Option<u8>, depth: usize) -> Result<Message, ParseError> {
        if depth > MAX_NESTING {
            return self.error(format!("messages are nested more than {MAX_NESTING} deep"));
        }
        let mut message = Message::default();
        loop {
            match (self.peek(), close) {
                (None, None) => return Ok(message),
                (None, Some(close)) => {
                    return self.error(format!("a message is not closed with '{}'", close as char));
                }
                (Some(Token::Mark(mark)), Some(close)) if *mark == close => {
                    self.at += 1;
                    return Ok(message);
                }
                _ => {}
            }
            let Some(Token::Word(name)) = self.next() else {
                self.at -= 1;
                return self.error("a field name is expected");
            };
            if !is_identifier(&name) {
                return self.error(format!("'{name}' is not a field name"));
            }
            let colon = self.eat(b':');
            if self.eat(b'[') {
                // Without ':', a list of messages only (`input [ { … } ]`).
                self.list(&name, &mut message, depth, colon)?;
            } else {
                let value = self.value(&name, colon, depth)?;
                message.fields.push(Field { name, value });
            }
            // An optional separator.
            let _ = self.eat(b',') || self.eat(b';');
        }
    }

    fn list(
        &mut self,
        name: &str,
        message: &mut Message,
        depth: usize,
        colon: bool,
    ) -> Result<(), ParseError> {
        if self.eat(b']') {
            return Ok(());
        }
        loop {
            let value = self.value(name, colon, depth)?;
            message.fields.push(Field {
                name: name.to_owned(),
                value,
            });
            if self.eat(b']') {
                return Ok(());
            }
            if !self.eat(b',') {
                return self.error(format!(
                    "field {name}: a list's values are separated by ','"
                ));
            }
        }
    }

    fn value(&mut self, name: &str, colon: bool, depth: usize) -> Result<Value, ParseError> {
        match self.next() {
            Some(Token::Mark(b'{')) => Ok(Value::Message(self.message(Some(b'}'), depth + 1)?)),
            Some(Token::Mark(b'<')) => Ok(Value::Message(self.message(Some(b'>'), depth + 1)?)),
            Some(Token::Text(text)) if colon => Ok(Value::Text(text)),
            Some(Token::Word(word)) if colon => {
                if word == "-" {
                    // protobuf reads `- 5` as `-5`.
                    match self.next() {
                        Some(Token::Word(number)) if !number.starts_with('-') => {
                            Ok(Value::Word(format!("-{number}")))
                        }
                        _ => {
                            self.at -= 1;
                            self.error(format!("field {name}: '-' is not followed by a number"))
                        }
                    }
                } else {
                    Ok(Value::Word(word))
                }
            }
            _ => {
                self.at -= 1;
                self.error(format!("field {name}: a value is expected"))
            }
        }
    }
}

fn is_identifier(word: &str) -> bool {
    let mut chars = word.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"_.-+".contains(&byte)
}

fn tokenize(bytes: &[u8]) -> Result<Vec<(Token, usize)>, ParseError> {
    let mut tokens: Vec<(Token, usize)> = Vec::new();
    let mut line = 1;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        if tokens.len() > MAX_TOKENS {
            return Err(ParseError {
                line,
                why: format!("it holds more than {MAX_TOKENS} tokens"),
            });
        }
        if byte == b'\n' {
            line += 1;
            at += 1;
        } else if byte.is_ascii_whitespace() || byte == 0x0b {
            // protobuf's tokenizer takes a vertical tab for space too.
            at += 1;
        } else if byte == b'#' {
            while bytes.get(at).is_some_and(|&b| b != b'\n') {
                at += 1;
            }
        } else if byte == b'"' || byte == b'\'' {
            let (text, end) =
                string_literal(bytes, at + 1, byte).map_err(|why| ParseError { line, why })?;
            at = end;
            match tokens.last_mut() {
                Some((Token::Text(previous), _)) => previous.push_str(&text),
                _ => tokens.push((Token::Text(text), line)),
            }
        } else if b"{}[]<>:,;".contains(&byte) {
            tokens.push((Token::Mark(byte), line));
            at += 1;
        } else if is_word_byte(byte) {
            let start = at;
            while bytes.get(at).copied().is_some_and(is_word_byte) {
                at += 1;
            }
            let word = String::from_utf8_lossy(&bytes[start..at]).into_owned();
            tokens.push((Token::Word(word), line));
        } else {
            return Err(ParseError {
                line,
                why: format!("unexpected character {:?}", byte as char),
            });
        }
    }
    Ok(tokens)
}

/// A literal's text from `at` up to its closing `quote`, escapes resolved; returns the text
/// and where it ends.
fn string_literal(bytes: &[u8], mut at: usize, quote: u8) -> Result<(String, usize), String> {
    let mut out = Vec::new();
    loop {
        let &byte = bytes.get(at).ok_or("a string is not closed")?;
        at += 1;
        if byte == quote {
            break;
        }
        match byte {
            b'\n' => return Err("a string runs past the end of its line".into()),
            b'\\' => {
                let &escaped = bytes.get(at).ok_or("a string ends in an escape")?;
                at += 1;
                at = escape(bytes, at, escaped, &mut out)?;
            }
            byte => out.push(byte),
        }
    }
    let text = String::from_utf8(out).map_err(|_| "a string is not UTF-8")?;
    Ok((text, at))
}

/// Resolves the escape `\<escaped>…` whose rest starts at `at` onto `out`; returns where it
/// ends.
fn escape(bytes: &[u8], at: usize, escaped: u8, out: &mut Vec<u8>) -> Result<usize, String> {
    let simple = match escaped {
        b'n' => Some(b'\n'),
        b't' => Some(b'\t'),
        b'r' => Some(b'\r'),
        b'a' => Some(0x07),
        b'b' => Some(0x08),
        b'f' => Some(0x0c),
        b'v' => Some(0x0b),
        b'\\' | b'\'' | b'"' | b'?' => Some(escaped),
        _ => None,
    };
    if let Some(byte) = simple {
        out.push(byte);
        return Ok(at);
    }
    match escaped {
        b'x' | b'X' => {
            let (value, end) = digits(bytes, at, 16, 2, 0);
            if end == at {
                return Err("a \\x escape has no digits".into());
            }
            out.push(u8::try_from(value).map_err(|_| "an escape is out of range")?);
            Ok(end)
        }
        b'0'..=b'7' => {
            let (value, end) = digits(bytes, at, 8, 2, u32::from(escaped - b'0'));
            // protobuf keeps the low eight bits (`\400` is a NUL byte), as a `char` cast does.
            out.push((value & 0xff) as u8);
            Ok(end)
        }
        b'u' | b'U' => {
            let count = if escaped == b'u' { 4 } else { 8 };
            let (value, end) = digits(bytes, at, 16, count, 0);
            if end - at != count {
                return Err(format!(
                    "a \\{} escape needs {count} digits",
                    escaped as char
                ));
            }
            let (value, end) = surrogate_pair(bytes, value, end);
            let c = char::from_u32(value).ok_or("a \\u escape is not a character")?;
            let mut buffer = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
            Ok(end)
        }
        other => Err(format!("unknown escape \\{}", other as char)),
    }
}

/// A UTF-16 high surrogate `value` followed (at `at`) by a `\\u` low surrogate, joined into
/// one code point as protobuf's tokenizer joins them; anything else as it is.
fn surrogate_pair(bytes: &[u8], value: u32, at: usize) -> (u32, usize) {
    if !(0xd800..0xdc00).contains(&value) || bytes.get(at..at + 2) != Some(b"\\u") {
        return (value, at);
    }
    let (low, end) = digits(bytes, at + 2, 16, 4, 0);
    if end - (at + 2) != 4 || !(0xdc00..0xe000).contains(&low) {
        return (value, at);
    }
    (0x10000 + ((value - 0xd800) << 10) + (low - 0xdc00), end)
}

/// Reads up to `max` digits of `radix` from `at` onto `value`; returns the value and where
/// the digits end.
fn digits(bytes: &[u8], mut at: usize, radix: u32, max: usize, mut value: u32) -> (u32, usize) {
    let end = at + max;
    while at < end
        && let Some(digit) = bytes.get(at).and_then(|&b| (b as char).to_digit(radix))
    {
        value = value.saturating_mul(radix).saturating_add(digit);
        at += 1;
    }
    (value, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Message {
        parse(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn every_way_of_writing_a_field_reads_the_same() {
        let plain = read("name: \"m\"\nparameters { key: \"k\" value { string_value: \"v\" } }");
        for text in [
            "name: 'm' parameters: { key: \"k\", value: { string_value: \"v\" } }",
            "name: \"m\"; parameters < key: 'k' value < string_value: \"v\" > >",
            "# a comment\nname: \"\\155\" parameters { key: \"\\x6b\" value { string_value: 'v' } }",
            "name: \"\\u006d\" parameters [ { key: \"k\" value { string_value: \"\" \"v\" } } ]",
        ] {
            assert_eq!(read(text), plain, "{text}");
        }
    }

    #[test]
    fn the_field_order_inside_an_entry_is_the_writer_s() {
        let config =
            read("parameters { value { string_value: \"/x\" } key: \"EXECUTION_ENV_PATH\" }");
        let entry = config.message("parameters").unwrap();
        assert_eq!(entry.text("key"), Some("EXECUTION_ENV_PATH"));
    }

    #[test]
    fn lists_numbers_and_signs_are_values() {
        let config = read("dims: [ -1, 3 ] dims: - 4 max_batch_size: 8 kind: KIND_CPU");
        let dims: Vec<_> = config.all("dims").collect();
        assert_eq!(
            dims,
            [
                &Value::Word("-1".into()),
                &Value::Word("3".into()),
                &Value::Word("-4".into())
            ]
        );
        assert_eq!(config.last("kind"), Some(&Value::Word("KIND_CPU".into())));
    }

    #[test]
    fn latin_1_comments_are_read_and_written_away() {
        let config = parse(b"# caf\xe9\nname: \"caf\\u00e9\"\n").unwrap();
        assert_eq!(config.text("name"), Some("caf\u{e9}"));
    }

    #[test]
    fn what_is_written_reads_back_as_itself() {
        let text = "name: \"a \\\"quoted\\\"\\n\\\\ caf\u{e9}\" input { name: \"x\" dims: [1, 2] } \
                    sequence_batching { oldest { max_candidate_sequences: 4 } }";
        let config = read(text);
        assert_eq!(read(&config.write()), config);
    }

    #[test]
    fn broken_configurations_are_errors_not_guesses() {
        for broken in [
            "name: \"open",
            "input { name: \"x\"",
            "name \"x\"",
            "name: }",
            "1name: 2",
            "name: \"\\q\"",
            "dims: [1 2]",
            "name: \"\\xff\"",
            "@",
        ] {
            assert!(parse(broken.as_bytes()).is_err(), "{broken}");
        }
        let deep = "a {".repeat(MAX_NESTING + 2) + &"}".repeat(MAX_NESTING + 2);
        assert!(parse(deep.as_bytes()).is_err());
    }

    #[test]
    fn what_protobufs_tokenizer_takes_is_taken() {
        // A vertical tab between fields, a surrogate pair, an octal escape past 255.
        let parsed = parse(b"backend:\x0b\"onnxruntime\"\x0bname: \"\\ud83d\\ude00\"").unwrap();
        assert_eq!(parsed.text("backend"), Some("onnxruntime"));
        assert_eq!(parsed.text("name"), Some("\u{1f600}"));
        let octal = parse(b"name: \"a\\400b\"").unwrap();
        assert_eq!(octal.text("name"), Some("a\0b"));
    }
}

//! A KServe v2 request's JSON read in one pass: its fields (`id`, `parameters`, `inputs`,
//! `outputs`), with each floating-point input's `data` decoded into tensor bytes as the reader
//! passes it, when its `datatype` came first (as every client we know writes it).
//!
//! serde's pass over a request captures `data` as text, which a second pass decodes: for a
//! 2.4 MB body of `FP32` numbers that first pass alone took 3.6–4.9 ms. This reader is the
//! common case without it. But for what the end of this paragraph says, it takes a strict
//! subset of what serde takes and gives, for what it takes, exactly the fields serde's path
//! gives (`v2_request` checks that with properties): any string with an escape or a control
//! character, a `null` where a value is expected, a shape that is not integers, nesting past
//! 100, or anything else out of the ordinary, and it declines (`None`), and the caller reads the
//! body with serde, which also words every error. What it takes that serde does not, as Triton's frontend (RapidJSON) does:
//! `NaN`, `Infinity` and `Inf` (with a `-`) as numbers (RapidJSON's `kParseNanAndInfFlag`;
//! Python's `json.dumps` writes them), and a field given twice, of which the first counts (the
//! later ones are checked for grammar only). A body serde must read (one this reader declines
//! for another reason) is refused with either, as serde reads JSON strictly. Either reader
//! takes a UTF-8 byte order mark before the document ([`read`]), and a number past RapidJSON's
//! bound anywhere, in a field nobody reads too, refuses the body in RapidJSON's words.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::ProtocolError;
use super::float_array;
use super::json_syntax::{nan_or_infinity, number_too_big, rapidjson_message, refusal};
use crate::engine::DataType;

/// Nesting deeper than this is declined (serde's own limit is 128).
const MAX_DEPTH: usize = 100;

/// A request's fields, borrowed from its JSON where they are text.
#[derive(Debug, PartialEq)]
pub struct Envelope<'a> {
    /// `id`.
    pub id: Option<String>,
    /// `parameters`, as text.
    pub parameters: Option<&'a str>,
    /// `inputs`.
    pub inputs: Vec<InputFields<'a>>,
    /// `outputs`.
    pub outputs: Vec<OutputFields<'a>>,
}

/// One input's fields.
#[derive(Debug, PartialEq)]
pub struct InputFields<'a> {
    /// `name`.
    pub name: String,
    /// `datatype`, as written.
    pub datatype: String,
    /// `shape`.
    pub shape: Vec<i64>,
    /// `parameters`, as text.
    pub parameters: Option<&'a str>,
    /// `data`.
    pub data: Option<TensorData<'a>>,
}

/// One requested output's fields.
#[derive(Debug, PartialEq)]
pub struct OutputFields<'a> {
    /// `name`.
    pub name: String,
    /// `parameters`, as text.
    pub parameters: Option<&'a str>,
}

/// An input's `data`.
#[derive(Debug, PartialEq)]
pub enum TensorData<'a> {
    /// As text, for the decoder to read (a slice of the request's JSON).
    Text(&'a str),
    /// Already decoded in the reader's pass: the tensor's bytes and its element count.
    Decoded(Vec<u8>, usize),
}

/// The request's fields: in one pass when the body is ordinary, else by serde, which also words
/// every refusal (in RapidJSON's words where RapidJSON refuses the body).
pub fn read(json: &[u8]) -> Result<Envelope<'_>, ProtocolError> {
    // A UTF-8 byte order mark before the document, which Triton's frontend takes.
    let json = json.strip_prefix(UTF8_BOM).unwrap_or(json);
    if let Some(envelope) = one_pass(json) {
        return Ok(envelope);
    }
    // RapidJSON refuses the whole body for a number past its bound anywhere, in a field serde
    // ignores too (`{"x":1e400,...}`).
    if let Some(message) = rapidjson_message(json) {
        return Err(ProtocolError::BadRequest(message));
    }
    with_serde(json)
}

/// The UTF-8 byte order mark.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The request's fields, read in one pass; `None` when the reader declines the body (see the
/// module's doc), and serde's path must read it.
pub fn one_pass(json: &[u8]) -> Option<Envelope<'_>> {
    let mut reader = Reader { json, at: 0 };
    let envelope = reader.envelope()?;
    reader.whitespace();
    (reader.at == json.len()).then_some(envelope)
}

// serde's reading of a request, for bodies the one-pass reader declines.
// `parameters` objects are captured as text and read once checked by RapidJSON's rules
// (`parameters`): serde takes numbers RapidJSON refuses (`0e400`).
#[derive(Deserialize)]
struct RequestJson<'a> {
    #[serde(default)]
    id: Option<String>,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
    #[serde(borrow)]
    inputs: Vec<InputJson<'a>>,
    #[serde(borrow, default)]
    outputs: Vec<OutputJson<'a>>,
}

#[derive(Deserialize)]
struct InputJson<'a> {
    name: String,
    datatype: String,
    shape: Vec<i64>,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct OutputJson<'a> {
    name: String,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
}

// Unknown keys are ignored, as Triton's own frontend does, so clients that send extra fields
// keep working.

impl<'a> From<RequestJson<'a>> for Envelope<'a> {
    fn from(json: RequestJson<'a>) -> Self {
        let text = |raw: Option<&'a RawValue>| raw.map(RawValue::get);
        Envelope {
            id: json.id,
            parameters: text(json.parameters),
            inputs: json
                .inputs
                .into_iter()
                .map(|input| InputFields {
                    name: input.name,
                    datatype: input.datatype,
                    shape: input.shape,
                    parameters: text(input.parameters),
                    data: text(input.data).map(TensorData::Text),
                })
                .collect(),
            outputs: json
                .outputs
                .into_iter()
                .map(|output| OutputFields {
                    name: output.name,
                    parameters: text(output.parameters),
                })
                .collect(),
        }
    }
}

/// The request's fields as serde reads them (what [`one_pass`] must agree with).
pub fn with_serde(json: &[u8]) -> Result<Envelope<'_>, ProtocolError> {
    serde_json::from_slice::<RequestJson>(json)
        .map(Envelope::from)
        .map_err(|e| {
            ProtocolError::BadRequest(refusal(json, &e, "failed to parse the request JSON"))
        })
}

/// A field of which the first occurrence counts.
struct Once<T>(Option<T>);

impl<T> Once<T> {
    /// Reads the field with `read` the first time it occurs; a later occurrence is only
    /// checked for grammar and ignored, as RapidJSON keeps every member and Triton's frontend
    /// reads the first.
    fn first<'a>(
        &mut self,
        r: &mut Reader<'a>,
        read: impl FnOnce(&mut Reader<'a>) -> Option<T>,
    ) -> Option<()> {
        if self.0.is_some() {
            return r.skip(0);
        }
        self.0 = Some(read(r)?);
        Some(())
    }
}

impl<T> Default for Once<T> {
    fn default() -> Self {
        Once(None)
    }
}

struct Reader<'a> {
    json: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn envelope(&mut self) -> Option<Envelope<'a>> {
        let (mut id, mut parameters, mut inputs, mut outputs) = (
            Once::default(),
            Once::default(),
            Once::default(),
            Once::default(),
        );
        self.object(|r, key| match key {
            "id" => id.first(r, Self::optional_string),
            "parameters" => parameters.first(r, Self::optional_object),
            "inputs" => inputs.first(r, |r| r.array(Self::input)),
            "outputs" => outputs.first(r, |r| r.array(Self::output)),
            _ => r.skip(0),
        })?;
        Some(Envelope {
            id: id.0.flatten(),
            parameters: parameters.0.flatten(),
            inputs: inputs.0?,
            outputs: outputs.0.unwrap_or_default(),
        })
    }

    fn input(&mut self) -> Option<InputFields<'a>> {
        let (mut name, mut datatype, mut shape, mut parameters, mut data) = (
            Once::default(),
            Once::<String>::default(),
            Once::default(),
            Once::default(),
            Once::default(),
        );
        self.object(|r, key| match key {
            "name" => name.first(r, |r| r.string().map(str::to_owned)),
            "datatype" => datatype.first(r, |r| r.string().map(str::to_owned)),
            "shape" => shape.first(r, |r| r.array(Self::integer)),
            "parameters" => parameters.first(r, Self::optional_object),
            "data" => {
                let dtype = datatype.0.as_deref().and_then(|d| d.parse().ok());
                data.first(r, |r| r.data(dtype))
            }
            _ => r.skip(0),
        })?;
        Some(InputFields {
            name: name.0?,
            datatype: datatype.0?,
            shape: shape.0?,
            parameters: parameters.0.flatten(),
            data: data.0,
        })
    }

    fn output(&mut self) -> Option<OutputFields<'a>> {
        let (mut name, mut parameters) = (Once::default(), Once::default());
        self.object(|r, key| match key {
            "name" => name.first(r, |r| r.string().map(str::to_owned)),
            "parameters" => parameters.first(r, Self::optional_object),
            _ => r.skip(0),
        })?;
        Some(OutputFields {
            name: name.0?,
            parameters: parameters.0.flatten(),
        })
    }

    /// `data`: decoded here for a floating-point `dtype` the fast reader takes, else as text.
    fn data(&mut self, dtype: Option<DataType>) -> Option<TensorData<'a>> {
        self.whitespace();
        if self.peek()? == b'n' {
            return None; // `null`: serde reads no data; its path words what follows.
        }
        if let Some(dtype) = dtype
            && let Some((bytes, count, end)) = float_array::decode_at(self.json, self.at, dtype)
        {
            self.at = end;
            return Some(TensorData::Decoded(bytes, count));
        }
        self.value_text().map(TensorData::Text)
    }

    /// Members of an object, each handed to `member` with its key.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &str) -> Option<()>) -> Option<()> {
        self.expect(b'{')?;
        self.whitespace();
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            self.whitespace();
            let key = self.string()?;
            self.expect(b':')?;
            member(self, key)?;
            self.whitespace();
            match self.bump()? {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// Elements of an array, each read by `element`.
    fn array<T>(&mut self, mut element: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        self.expect(b'[')?;
        let mut out = Vec::new();
        self.whitespace();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(out);
        }
        loop {
            self.whitespace();
            out.push(element(self)?);
            self.whitespace();
            match self.bump()? {
                b',' => {}
                b']' => return Some(out),
                _ => return None,
            }
        }
    }

    /// A string without escapes or control characters, in valid UTF-8: its content.
    fn string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.at;
        loop {
            match self.bump()? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => {}
            }
        }
        std::str::from_utf8(&self.json[start..self.at - 1]).ok()
    }

    /// A string or `null` (serde's `Option<String>`).
    fn optional_string(&mut self) -> Option<Option<String>> {
        self.whitespace();
        match self.peek()? {
            b'n' => self.literal(b"null").map(|()| None),
            _ => self.string().map(|s| Some(s.to_owned())),
        }
    }

    /// An object, as text, or `null`; anything else declines (serde's path words it).
    fn optional_object(&mut self) -> Option<Option<&'a str>> {
        self.whitespace();
        match self.peek()? {
            b'n' => self.literal(b"null").map(|()| None),
            b'{' => self.value_text().map(Some),
            _ => None,
        }
    }

    /// An integer within `i64` as serde's `i64` takes it: no fraction, no exponent, and not
    /// `-0` (serde reads that as the double -0.0).
    fn integer(&mut self) -> Option<i64> {
        self.whitespace();
        let start = self.at;
        let end = self.number_end()?;
        let text = std::str::from_utf8(&self.json[start..end]).ok()?;
        if text.contains(['.', 'e', 'E']) || text == "-0" {
            return None;
        }
        self.at = end;
        text.parse().ok()
    }

    /// Any value, as the text it spans (serde's `RawValue`).
    fn value_text(&mut self) -> Option<&'a str> {
        self.whitespace();
        let start = self.at;
        self.skip(0)?;
        std::str::from_utf8(&self.json[start..self.at]).ok()
    }

    /// Passes over any value, checking its grammar.
    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.whitespace();
        match self.peek()? {
            b'{' => self.object(|r, _| r.skip(depth + 1)),
            b'[' => self.array(|r| r.skip(depth + 1)).map(drop),
            b'"' => self.string().map(drop),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number_end().map(|end| self.at = end),
        }
    }

    /// Where the JSON number starting here ends (`-? (0 | [1-9][0-9]*) (. [0-9]+)?
    /// ([eE] [+-]? [0-9]+)?`, or `NaN`, `Inf`, `Infinity` as Triton reads them); `None` when
    /// there is none.
    fn number_end(&self) -> Option<usize> {
        let json = self.json;
        let digits = |mut at: usize| {
            let from = at;
            while json.get(at).is_some_and(u8::is_ascii_digit) {
                at += 1;
            }
            (at > from).then_some(at)
        };
        let mut at = self.at + usize::from(json.get(self.at) == Some(&b'-'));
        at = match json.get(at)? {
            b'0' => at + 1,
            b'1'..=b'9' => digits(at)?,
            b'N' | b'I' => return nan_or_infinity(json, self.at).ok().map(|(end, _)| end),
            _ => return None,
        };
        if json.get(at) == Some(&b'.') {
            at = digits(at + 1)?;
        }
        let mut exponent = false;
        if let Some(b'e' | b'E') = json.get(at) {
            at += 1;
            if let Some(b'+' | b'-') = json.get(at) {
                at += 1;
            }
            at = digits(at)?;
            exponent = true;
        }
        // Past RapidJSON's bound (only an exponent or 300 digits can be): its refusal is the
        // body's, worded by the caller.
        if (exponent || at - self.at > 300) && number_too_big(&json[self.at..at]) {
            return None;
        }
        Some(at)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.json.get(self.at..end)? == word).then(|| self.at = end)
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.whitespace();
        (self.bump()? == byte).then_some(())
    }

    fn peek(&self) -> Option<u8> {
        self.json.get(self.at).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_request_and_decodes_float_data_in_its_pass() {
        let json = br#" {"id":"r1","inputs":[{"name":"X","shape":[1,2],"datatype":"FP32","data":[[1.5,-2]]},
            {"name":"Y","datatype":"INT32","shape":[2],"data":[1, 2],"parameters":{"a":1}}],
            "outputs":[{"name":"Z","parameters":{"binary_data":true}}],"extra":[{"x":[null,true]}]} "#;
        let envelope = one_pass(json).unwrap();
        assert_eq!(envelope.id.as_deref(), Some("r1"));
        assert_eq!(envelope.parameters, None);
        let expected: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            envelope.inputs[0].data,
            Some(TensorData::Decoded(expected, 2))
        );
        assert_eq!(envelope.inputs[1].data, Some(TensorData::Text("[1, 2]")));
        assert_eq!(envelope.inputs[1].parameters, Some(r#"{"a":1}"#));
        assert_eq!(envelope.inputs[1].shape, [2]);
        assert_eq!(
            envelope.outputs[0].parameters,
            Some(r#"{"binary_data":true}"#)
        );
    }

    #[test]
    fn data_before_its_datatype_is_kept_as_text() {
        let json = br#"{"inputs":[{"data":[1.5],"name":"X","shape":[1],"datatype":"FP32"}]}"#;
        let envelope = one_pass(json).unwrap();
        assert_eq!(envelope.inputs[0].data, Some(TensorData::Text("[1.5]")));
    }

    /// As Triton's frontend reads a body: the first of a field given twice (the later one only
    /// checked for grammar), a byte order mark, and a number past RapidJSON's bound anywhere
    /// refused in its words (issue 43, case 11).
    #[test]
    fn duplicates_a_byte_order_mark_and_huge_numbers_as_triton_reads_them() {
        let twice = br#"{"id":"a","inputs":[{"name":"X","datatype":"FP32","shape":[1],"data":[1],"name":"Y","data":"x"}],"inputs":"ignored","id":"b"}"#;
        let envelope = read(twice).unwrap();
        assert_eq!(envelope.id.as_deref(), Some("a"));
        assert_eq!(envelope.inputs.len(), 1);
        assert_eq!(envelope.inputs[0].name, "X");
        assert_eq!(
            envelope.inputs[0].data,
            Some(TensorData::Decoded(1f32.to_le_bytes().to_vec(), 1))
        );
        let marked = b"\xEF\xBB\xBF{\"inputs\":[]}";
        assert!(read(marked).unwrap().inputs.is_empty());
        for body in [
            &br#"{"x":1e400,"inputs":[]}"#[..],
            br#"{"x":"A","y":[0e400],"inputs":[]}"#,
        ] {
            let Err(ProtocolError::BadRequest(message)) = read(body) else {
                panic!("{}", String::from_utf8_lossy(body));
            };
            assert!(
                message.starts_with("failed to parse the request JSON buffer: Number too big"),
                "{message}"
            );
        }
    }

    #[test]
    fn declines_what_it_does_not_take_as_is() {
        for json in [
            "",
            "[]",
            "{}",
            r#"{"inputs":[]} x"#,
            r#"{"inputs":[],"inputs":[}"#,
            r#"{"inputs":[],"x":1e400}"#,
            r#"{"inputs":null}"#,
            r#"{"inputs":[],"outputs":null}"#,
            r#"{"inputs":[{"name":"X","datatype":"FP32","shape":[1.0],"data":[1]}]}"#,
            r#"{"inputs":[{"name":"X","datatype":"FP32","shape":[1e0],"data":[1]}]}"#,
            r#"{"inputs":[{"name":"X","datatype":"FP32","shape":[-0],"data":[1]}]}"#,
            r#"{"inputs":[{"name":"X","datatype":"FP32","shape":[99999999999999999999],"data":[1]}]}"#,
            r#"{"inputs":[{"name":"X\u0041","datatype":"FP32","shape":[1],"data":[1]}]}"#,
            r#"{"inputs":[{"name":"X","datatype":"FP32","shape":[1],"data":null}]}"#,
            r#"{"inputs":[{"name":"X","datatype":"FP32","shape":[1],"data":[1,]}]}"#,
            r#"{"inputs":[{"name":"X","datatype":"FP32","shape":[1],"parameters":5,"data":[1]}]}"#,
            r#"{"inputs":[{"name":"X","datatype":"FP32","shape":[1]}],"x":[01]}"#,
            "{\"inputs\":[],\"x\":\"a\tb\"}",
            r#"{"inputs":[{"name":"X","datatype":"FP32","shape":[1]}],"x":tru}"#,
            r#"{"inputs":[],}"#,
            "{\"inputs\":[],\"x\":\"\u{0}\"}",
        ] {
            assert_eq!(one_pass(json.as_bytes()), None, "{json}");
        }
        let deep = format!(
            r#"{{"inputs":[],"x":{}1{}}}"#,
            "[".repeat(102),
            "]".repeat(102)
        );
        assert_eq!(one_pass(deep.as_bytes()), None);
        assert_eq!(one_pass(b"{\"inputs\":[],\"x\":\"\xff\"}"), None);
    }

    /// What the one-pass reader takes, serde takes, with the same fields: decoded data is what
    /// the float decoder makes of serde's text for it.
    fn agrees(json: &[u8]) {
        let Some(fast) = one_pass(json) else {
            return;
        };
        let text = String::from_utf8_lossy(json);
        // serde reads JSON strictly: non-finite numbers are this reader's alone (the module's
        // doc); the float decoder's tests check what they decode to.
        if text.contains("NaN") || text.contains("Inf") {
            return;
        }
        let slow = with_serde(json).unwrap_or_else(|e| panic!("serde refused {text}: {e}"));
        assert_eq!(fast.inputs.len(), slow.inputs.len(), "{text}");
        for (fast, slow) in fast.inputs.iter().zip(&slow.inputs) {
            if let (Some(TensorData::Decoded(bytes, count)), Some(TensorData::Text(raw))) =
                (&fast.data, &slow.data)
            {
                let dtype = fast.datatype.parse().unwrap();
                let decoded = float_array::decode(raw, dtype);
                assert_eq!(decoded.as_ref(), Some(&(bytes.clone(), *count)), "{text}");
            } else {
                assert_eq!(fast, slow, "{text}");
            }
        }
        assert_eq!(
            (fast.id, fast.parameters, fast.outputs),
            (slow.id, slow.parameters, slow.outputs),
            "{text}"
        );
    }

    mod properties {
        use super::agrees;
        use proptest::prelude::*;

        fn space() -> impl Strategy<Value = String> {
            prop::sample::select(vec!["", "", " ", "\n ", "\t"]).prop_map(str::to_owned)
        }

        /// Numbers every JSON reader takes.
        const WELL_FORMED: [&str; 11] = [
            "0",
            "-0",
            "1",
            "-2.5",
            "1e3",
            "1E-3",
            "0.1",
            "3.4028235e38",
            "9e308",
            "12345678901234567890",
            "5e-324",
        ];

        /// Numbers RapidJSON refuses (past its bound) or that are not JSON.
        const REFUSED: [&str; 12] = [
            "1e400", "0e400", "01", "1.", ".5", "+1", "-", "1e", "nan", "-0.e1", "Na", "Infinit",
        ];

        /// Numbers Triton's reader takes and serde does not.
        const NON_FINITE: [&str; 3] = ["NaN", "-Infinity", "Inf"];

        fn number() -> impl Strategy<Value = String> {
            prop::sample::select(
                [
                    WELL_FORMED.as_slice(),
                    REFUSED.as_slice(),
                    NON_FINITE.as_slice(),
                ]
                .concat(),
            )
            .prop_map(str::to_owned)
        }

        fn value(depth: u32) -> BoxedStrategy<String> {
            let leaf = prop_oneof![
                3 => number(),
                3 => prop::sample::select(vec!["true", "false", "null", "\"s\"", "\"\u{e9}\""])
                    .prop_map(str::to_owned),
                1 => prop::sample::select(vec!["\"a\\\"b\"", "\"\\u0041\"", "nul", "\"\u{1}\""])
                    .prop_map(str::to_owned),
            ];
            if depth == 0 {
                return leaf.boxed();
            }
            prop_oneof![
                leaf,
                (prop::collection::vec(value(depth - 1), 0..4), space())
                    .prop_map(|(items, s)| format!("[{s}{}{s}]", items.join(","))),
                object(depth - 1),
            ]
            .boxed()
        }

        fn object(depth: u32) -> BoxedStrategy<String> {
            prop::collection::vec(value(depth), 0..3)
                .prop_map(|items| {
                    let members: Vec<String> = items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| format!("\"k{i}\":{v}"))
                        .collect();
                    format!("{{{}}}", members.join(","))
                })
                .boxed()
        }

        /// A `parameters` value: mostly an object, sometimes anything.
        fn parameters() -> impl Strategy<Value = String> {
            prop_oneof![4 => object(1), 1 => value(1)]
        }

        /// A well-formed number: one of the edge cases, or any finite double written either way.
        fn good_number() -> impl Strategy<Value = String> {
            prop_oneof![
                prop::sample::select(WELL_FORMED.as_slice()).prop_map(str::to_owned),
                any::<f64>()
                    .prop_filter("finite", |v| v.is_finite())
                    .prop_map(|v| format!("{v}")),
                any::<f32>()
                    .prop_filter("finite", |v| v.is_finite())
                    .prop_map(|v| format!("{v:e}")),
            ]
        }

        /// Nested arrays of well-formed numbers (what the one-pass reader decodes).
        fn float_data() -> impl Strategy<Value = String> {
            let leaf = (prop::collection::vec(good_number(), 0..6), space())
                .prop_map(|(items, s)| format!("[{s}{}]", items.join(&format!(",{s}"))));
            leaf.prop_recursive(3, 16, 3, |inner| {
                prop::collection::vec(inner, 0..3)
                    .prop_map(|items| format!("[{}]", items.join(",")))
            })
        }

        fn input() -> impl Strategy<Value = String> {
            let datatype = prop::sample::select(vec![
                "\"FP32\"",
                "\"FP64\"",
                "\"FP16\"",
                "\"BF16\"",
                "\"FP32\"",
                "\"FP32\"",
                "\"INT32\"",
                "\"BYTES\"",
                "\"fp32\"",
                "null",
            ]);
            let dimension = prop_oneof![3 => (0u32..20).prop_map(|d| d.to_string()), 1 => number()];
            let shape =
                prop::collection::vec(dimension, 0..3).prop_map(|d| format!("[{}]", d.join(",")));
            let data = prop_oneof![3 => float_data(), 1 => value(3)];
            (
                datatype,
                shape,
                data,
                prop::option::of(parameters()),
                prop::option::of(value(1)),
                any::<u64>(),
                space(),
            )
                .prop_map(|(datatype, shape, data, parameters, extra, order, s)| {
                    let mut members = vec![
                        "\"name\":\"X\"".to_owned(),
                        format!("\"datatype\":{s}{datatype}"),
                        format!("\"shape\":{shape}"),
                        format!("\"data\":{s}{data}{s}"),
                    ];
                    members.extend(parameters.map(|p| format!("\"parameters\":{p}")));
                    members.extend(extra.map(|x| format!("\"extra\":{x}")));
                    shuffle(&mut members, order);
                    format!("{{{}}}", members.join(","))
                })
        }

        fn shuffle(items: &mut [String], mut seed: u64) {
            for i in (1..items.len()).rev() {
                items.swap(i, (seed % (i as u64 + 1)) as usize);
                seed /= i as u64 + 1;
            }
        }

        fn request() -> impl Strategy<Value = String> {
            (
                prop::collection::vec(input(), 0..3),
                prop::option::of(parameters()),
                prop::option::of(prop::sample::select(vec!["\"r\"", "\"r\"", "null", "7"])),
                prop::option::of(parameters()),
                any::<u64>(),
                space(),
            )
                .prop_map(|(inputs, parameters, id, extra, order, s)| {
                    let mut members = vec![format!("\"inputs\":{s}[{}]", inputs.join(","))];
                    members.extend(parameters.map(|p| format!("\"parameters\":{p}")));
                    members.extend(id.map(|i| format!("\"id\":{i}")));
                    members.extend(
                        extra.map(|x| {
                            format!("\"outputs\":[{{\"name\":\"Y\",\"parameters\":{x}}}]")
                        }),
                    );
                    shuffle(&mut members, order);
                    format!("{s}{{{s}{}{s}}}{s}", members.join(","))
                })
        }

        /// The properties below mean something: the one-pass reader takes a good share of the
        /// generated requests, decoding float data in some.
        #[test]
        fn generated_requests_reach_the_one_pass_reader() {
            use proptest::strategy::ValueTree;
            use proptest::test_runner::TestRunner;
            let mut runner = TestRunner::deterministic();
            let (mut taken, mut decoded) = (0, 0);
            for _ in 0..1000 {
                let json = request().new_tree(&mut runner).unwrap().current();
                if let Some(envelope) = super::one_pass(json.as_bytes()) {
                    taken += 1;
                    decoded += envelope
                        .inputs
                        .iter()
                        .filter(|i| matches!(i.data, Some(super::TensorData::Decoded(..))))
                        .count();
                }
            }
            assert!(
                taken >= 100 && decoded >= 25,
                "taken {taken}, decoded {decoded}"
            );
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn one_pass_agrees_with_serde(json in request()) {
                agrees(json.as_bytes());
            }

            #[test]
            fn one_pass_agrees_with_serde_on_damaged_bodies(
                json in request(),
                at in any::<prop::sample::Index>(),
                byte in prop::sample::select(b"{}[],:\"\\ 0-.e1nx\x00\xc3".to_vec()),
                cut in any::<bool>(),
            ) {
                let mut json = json.into_bytes();
                let at = at.index(json.len().max(1));
                match (cut, at < json.len()) {
                    (true, true) => json.truncate(at),
                    (false, true) => json[at] = byte,
                    _ => json.push(byte),
                }
                agrees(&json);
            }
        }
    }
}

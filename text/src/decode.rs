//! Ids to text: whole ([`decode`]), or streamed ([`StreamDecoder`]), where each step's text is
//! exactly what the new ids add.
//!
//! Streaming is Hugging Face's `DecodeStream` algorithm (step for step the results of
//! `tokenizers.decoders.DecodeStream` in Python, which, unlike [`StreamDecoder::finish`], keeps
//! back at the end what pending ids make, and has no bound on them): the new ids are decoded together with the
//! ids of the text sent last, as context, and only what follows that context's text is new. The
//! context lets the decoder do what it does between tokens (a space before a word, `##` pieces
//! joined, a character whose bytes span several tokens, a space before punctuation cleaned up),
//! so the texts of all steps together are the text of the whole sequence. A step whose text ends
//! in an incomplete character sends nothing and waits for the ids that complete it.
//!
//! Bounds: the state is the context (the ids of the last text sent: one step's ids, or at most
//! [`MAX_PENDING`] + 1) and the pending ids. Past [`MAX_PENDING`] pending ids (a model that
//! emits only skipped special tokens, or bytes that never form a character), what they make is
//! sent as it stands and they become the context. A step costs the decoding of its window.

use serde_json::{Map, Value};

use crate::{Error, Tokenizer};

/// Ids a stream may hold back before it sends what they make as it stands.
pub const MAX_PENDING: usize = 16;

/// The text of `ids`; `skip_special`: without the special tokens. An id the tokenizer does not
/// have is a 400 naming it.
pub fn decode(tokenizer: &Tokenizer, ids: &[u32], skip_special: bool) -> Result<String, Error> {
    check_ids(tokenizer, ids)?;
    tokenizer
        .inner
        .decode(ids, skip_special)
        .map_err(|error| Error::BadRequest(format!("the ids cannot be decoded: {error}")))
}

/// Refuses an id past the tokenizer's vocabulary (`tokenizers` would drop it without a word).
fn check_ids(tokenizer: &Tokenizer, ids: &[u32]) -> Result<(), Error> {
    match ids
        .iter()
        .find(|id| usize::try_from(**id).map_or(true, |id| id >= tokenizer.vocabulary()))
    {
        Some(id) => Err(Error::BadRequest(format!(
            "id {id} is not a token of the tokenizer ({} tokens)",
            tokenizer.vocabulary()
        ))),
        None => Ok(()),
    }
}

/// One stream's decoding state, kept between steps (by [`StreamDecoder::to_bytes`] where steps
/// run in separate instances).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamDecoder {
    /// The context (the ids whose text was sent last) followed by the pending ids.
    ids: Vec<u32>,
    /// How many of `ids` are context.
    context: usize,
}

impl StreamDecoder {
    /// A stream before its first id.
    pub fn new() -> StreamDecoder {
        StreamDecoder::default()
    }

    /// The text `new` adds to the stream (empty while a character is incomplete).
    pub fn step(
        &mut self,
        tokenizer: &Tokenizer,
        new: &[u32],
        skip_special: bool,
    ) -> Result<String, Error> {
        check_ids(tokenizer, new)?;
        self.ids.extend_from_slice(new);
        let prefix = decode(tokenizer, &self.ids[..self.context], skip_special)?;
        let text = decode(tokenizer, &self.ids, skip_special)?;
        let complete = text.len() > prefix.len() && !text.ends_with('\u{FFFD}');
        if complete || self.ids.len() - self.context > MAX_PENDING {
            return Ok(self.send(&prefix, &text));
        }
        Ok(String::new())
    }

    /// The text the pending ids make at the end of the stream, as it stands.
    pub fn finish(&mut self, tokenizer: &Tokenizer, skip_special: bool) -> Result<String, Error> {
        if self.ids.len() == self.context {
            return Ok(String::new());
        }
        let prefix = decode(tokenizer, &self.ids[..self.context], skip_special)?;
        let text = decode(tokenizer, &self.ids, skip_special)?;
        Ok(self.send(&prefix, &text))
    }

    /// What `text` adds after `prefix`, the pending ids made the context. A decoder that
    /// rewrote the context's text (rare) gets what follows the text the two share.
    fn send(&mut self, prefix: &str, text: &str) -> String {
        let shared = if text.starts_with(prefix) {
            prefix.len()
        } else {
            let mut shared = prefix
                .bytes()
                .zip(text.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            while !text.is_char_boundary(shared) {
                shared -= 1;
            }
            shared
        };
        self.ids.drain(..self.context);
        self.context = self.ids.len();
        text[shared..].to_owned()
    }

    /// The state as bytes: the number of context ids, then every id, each a little-endian u32.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(4 * (self.ids.len() + 1));
        let context = u32::try_from(self.context).unwrap_or(u32::MAX);
        bytes.extend_from_slice(&context.to_le_bytes());
        for id in &self.ids {
            bytes.extend_from_slice(&id.to_le_bytes());
        }
        bytes
    }

    /// The decoder a stream's previous calls kept (`state`, as [`StreamDecoder::to_bytes`]
    /// wrote it), or a new one when they kept nothing; an error for bytes no decoder wrote.
    pub fn resume(state: Option<&[u8]>) -> Result<StreamDecoder, String> {
        match state {
            None => Ok(StreamDecoder::new()),
            Some(bytes) => StreamDecoder::from_bytes(bytes)
                .ok_or_else(|| "the stream's state is not a decoder's".to_owned()),
        }
    }

    /// The state [`StreamDecoder::to_bytes`] wrote; `None` for bytes it cannot have written.
    pub fn from_bytes(bytes: &[u8]) -> Option<StreamDecoder> {
        let (words, rest) = bytes.as_chunks::<4>();
        let (first, ids) = words.split_first()?;
        let context = usize::try_from(u32::from_le_bytes(*first)).ok()?;
        if !rest.is_empty() || context > ids.len() {
            return None;
        }
        Some(StreamDecoder {
            ids: ids.iter().map(|id| u32::from_le_bytes(*id)).collect(),
            context,
        })
    }
}

/// The token ids a model's response (one generate response, as a JSON object) holds in its
/// output `name`: a number or a list of them. An error names what is missing or wrong: the
/// model's answer, not the client's request, so callers answer it with a 500.
pub fn output_ids(response: &Map<String, Value>, name: &str) -> Result<Vec<u32>, String> {
    match response.get(name) {
        Some(Value::Array(values)) => values.iter().map(|v| token_id(v, name)).collect(),
        Some(single) => token_id(single, name).map(|id| vec![id]),
        None => Err(format!("the model's response has no output '{name}'")),
    }
}

/// `value` as a token id, or why it is not one.
fn token_id(value: &Value, name: &str) -> Result<u32, String> {
    value
        .as_u64()
        .and_then(|id| u32::try_from(id).ok())
        .ok_or_else(|| format!("output '{name}' holds {value}, which is not a token id"))
}

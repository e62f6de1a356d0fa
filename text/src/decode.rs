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
//! Bounds: the state is the context (the last at most [`MAX_CONTEXT`] ids of the text sent
//! last) and the pending ids. Past [`MAX_PENDING`] pending ids (a model that emits only skipped
//! special tokens, or bytes that never form a character), what they make is sent as it stands
//! and they become the context. A step of many ids (an event of 16,384) is decoded whole, and
//! only its last ids are kept as the next step's context: what a decoder does between tokens
//! reaches back a few tokens (a space, a piece joined, a character's four bytes), never sixteen.
//! So the state is at most 33 ids whatever the steps, and a step costs the decoding of its
//! window.

use serde_json::{Map, Value};

use crate::{Error, Tokenizer};

/// Ids a stream may hold back before it sends what they make as it stands.
pub const MAX_PENDING: usize = 16;

/// The most ids of the text sent last that a stream keeps as the next step's context.
pub const MAX_CONTEXT: usize = 16;

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
        let complete = |text: &str| text.len() > prefix.len() && !text.ends_with('\u{FFFD}');
        if complete(&text) {
            return Ok(self.send(&prefix, &text, self.ids.len()));
        }
        let pending = self.ids.len() - self.context;
        if pending <= MAX_PENDING {
            return Ok(String::new());
        }
        // Past the bound: what all but the last few ids make is sent when that is whole (an
        // event of many ids ending mid-character keeps only that character's ids back), else
        // everything as it stands.
        for back in 1..=MAX_PENDING.min(pending - 1) {
            let end = self.ids.len() - back;
            let shorter = decode(tokenizer, &self.ids[..end], skip_special)?;
            if complete(&shorter) {
                return Ok(self.send(&prefix, &shorter, end));
            }
        }
        Ok(self.send(&prefix, &text, self.ids.len()))
    }

    /// The text the pending ids make at the end of the stream, as it stands.
    pub fn finish(&mut self, tokenizer: &Tokenizer, skip_special: bool) -> Result<String, Error> {
        if self.ids.len() == self.context {
            return Ok(String::new());
        }
        let prefix = decode(tokenizer, &self.ids[..self.context], skip_special)?;
        let text = decode(tokenizer, &self.ids, skip_special)?;
        Ok(self.send(&prefix, &text, self.ids.len()))
    }

    /// What `text` (the text of the ids up to `end`) adds after `prefix`, the ids up to `end`
    /// made the context (its last [`MAX_CONTEXT`] at most) and those after it pending. A
    /// decoder that rewrote the context's text (rare) gets what follows the text the two share.
    fn send(&mut self, prefix: &str, text: &str, end: usize) -> String {
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
        let keep = end.saturating_sub(MAX_CONTEXT).max(self.context);
        self.ids.drain(..keep);
        self.context = end - keep;
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

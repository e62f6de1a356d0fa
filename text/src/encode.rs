//! Texts to the tensors a transformer takes: `input_ids`, `attention_mask` and
//! `token_type_ids`, one row per text, every row brought to one length by the tokenizer's
//! settings ([`crate::Encode`]). The texts' length is checked against [`Limits`] before they are
//! tokenized, so the tokenizer's memory and time are bounded by the limit, not by the body.

use crate::settings::Datatype;
use crate::{Error, Limits, Tokenizer};

/// The tensors of a request's texts, row-major, `rows` × `length` values each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// How many texts (rows).
    pub rows: usize,
    /// Tokens per row, padding included.
    pub length: usize,
    /// The token ids.
    pub input_ids: Vec<u32>,
    /// 1 for a token, 0 for padding.
    pub attention_mask: Vec<u32>,
    /// The segment of each token (0 for a single text).
    pub token_type_ids: Vec<u32>,
}

impl Encoded {
    /// The tensors' shape: `[rows, length]`, or `[length]` without a batch dimension.
    pub fn shape(&self, batch: bool) -> Vec<i64> {
        let length = i64::try_from(self.length).unwrap_or(i64::MAX);
        if batch {
            vec![i64::try_from(self.rows).unwrap_or(i64::MAX), length]
        } else {
            vec![length]
        }
    }
}

/// `values` as a tensor's bytes of `datatype`, little-endian.
pub fn tensor_bytes(values: &[u32], datatype: Datatype) -> Vec<u8> {
    match datatype {
        Datatype::Int64 => values
            .iter()
            .flat_map(|v| i64::from(*v).to_le_bytes())
            .collect(),
        Datatype::Int32 => values
            .iter()
            // Ids fit: a tokenizer with more than i32::MAX tokens is refused for INT32 at load.
            .flat_map(|v| i32::try_from(*v).unwrap_or(i32::MAX).to_le_bytes())
            .collect(),
    }
}

/// The tensors of `texts` under `tokenizer`'s settings, within `limits`.
pub fn encode<S: AsRef<str>>(
    tokenizer: &Tokenizer,
    texts: &[S],
    limits: &Limits,
) -> Result<Encoded, Error> {
    encode_within(tokenizer, texts, limits, &|| false)
        .map(|encoded| encoded.expect("never out of time"))
}

/// [`encode`] for work that has a deadline: `out_of_time` is asked before each text is
/// tokenized, and `Ok(None)` returned once it says so (the host's primitives, whose caller's
/// deadline the epoch does not see). The texts are tokenized one by one and padded together,
/// as `tokenizers`' `encode_batch_fast` does.
pub fn encode_within<S: AsRef<str>>(
    tokenizer: &Tokenizer,
    texts: &[S],
    limits: &Limits,
    out_of_time: &dyn Fn() -> bool,
) -> Result<Option<Encoded>, Error> {
    let settings = tokenizer.settings();
    if texts.is_empty() {
        return Err(Error::BadRequest("there is no text to tokenize".into()));
    }
    if texts.len() > limits.max_texts {
        return Err(Error::BadRequest(format!(
            "{} texts; this endpoint takes at most {} per request",
            texts.len(),
            limits.max_texts
        )));
    }
    if !settings.batch && texts.len() != 1 {
        return Err(Error::BadRequest(format!(
            "this model takes one text per request, and the body holds {}",
            texts.len()
        )));
    }
    let bytes: usize = texts.iter().map(|text| text.as_ref().len()).sum();
    if bytes > limits.max_text_bytes {
        let what = if texts.len() == 1 {
            "the text is"
        } else {
            "the texts are"
        };
        return Err(Error::BadRequest(format!(
            "{what} {bytes} bytes long; this endpoint takes at most {} bytes of text per request",
            limits.max_text_bytes
        )));
    }
    let cannot = |error: tokenizers::Error| {
        Error::BadRequest(format!("the text cannot be tokenized: {error}"))
    };
    let mut encodings = Vec::with_capacity(texts.len());
    for text in texts {
        if out_of_time() {
            return Ok(None);
        }
        encodings.push(
            tokenizer
                .inner
                .encode_fast(text.as_ref(), settings.add_special_tokens)
                .map_err(cannot)?,
        );
    }
    if let Some(padding) = tokenizer.inner.get_padding() {
        tokenizers::utils::padding::pad_encodings(&mut encodings, padding).map_err(cannot)?;
    }
    let length = encodings.first().map_or(0, tokenizers::Encoding::len);
    let mut encoded = Encoded {
        rows: encodings.len(),
        length,
        input_ids: Vec::with_capacity(length * encodings.len()),
        attention_mask: Vec::with_capacity(length * encodings.len()),
        token_type_ids: Vec::with_capacity(length * encodings.len()),
    };
    for (index, encoding) in encodings.iter().enumerate() {
        if encoding.len() > settings.max_length {
            return Err(Error::BadRequest(format!(
                "{} is {} tokens long; this model takes at most {} (and the endpoint does not \
                 truncate)",
                which(texts.len(), index),
                encoding.len(),
                settings.max_length
            )));
        }
        // Padding brings every row to one length; a row of another would be a tokenizer bug.
        if encoding.len() != length {
            return Err(Error::BadRequest(format!(
                "{} is {} tokens after padding, and the first {length}",
                which(texts.len(), index),
                encoding.len()
            )));
        }
        encoded.input_ids.extend_from_slice(encoding.get_ids());
        encoded
            .attention_mask
            .extend_from_slice(encoding.get_attention_mask());
        encoded
            .token_type_ids
            .extend_from_slice(encoding.get_type_ids());
    }
    Ok(Some(encoded))
}

/// How errors name the text at `index` of `count`.
fn which(count: usize, index: usize) -> String {
    if count == 1 {
        "the text".to_owned()
    } else {
        format!("text {}", index + 1)
    }
}

//! Texts to the tensors a transformer takes: `input_ids`, `attention_mask` and
//! `token_type_ids`, one row per text, every row brought to one length by the tokenizer's
//! settings ([`crate::Encode`]). The texts' length is checked against [`Limits`] before they are
//! tokenized, so the tokenizer's memory and time are bounded by the limit, not by the body.

use tokenizers::{Model, OffsetType, PostProcessor, PreTokenizer, TruncationStrategy};

use crate::bert_ascii::{Normalize, PreTokenize};

use crate::request::{Input, Parameters, Truncation};
use crate::settings::Datatype;
use crate::{Encode, Error, Limits, Tokenizer};

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
    let bytes: usize = texts.iter().map(|text| text.as_ref().len()).sum();
    admit(settings, limits, texts.len(), bytes)?;
    let cannot = |error: tokenizers::Error| {
        Error::BadRequest(format!("the text cannot be tokenized: {error}"))
    };
    let mut encodings = Vec::with_capacity(texts.len());
    for text in texts {
        if out_of_time() {
            return Ok(None);
        }
        encodings.push(
            single(&tokenizer.inner, text.as_ref(), settings.add_special_tokens).map_err(cannot)?,
        );
    }
    if let Some(padding) = tokenizer.inner.get_padding() {
        tokenizers::utils::padding::pad_encodings(&mut encodings, padding).map_err(cannot)?;
    }
    rows(settings, encodings).map(Some)
}

/// Refuses a request of `count` rows and `bytes` bytes of text its settings and limits do not
/// take, before anything is tokenized.
fn admit(settings: &Encode, limits: &Limits, count: usize, bytes: usize) -> Result<(), Error> {
    if count == 0 {
        return Err(Error::BadRequest("there is no text to tokenize".into()));
    }
    if count > limits.max_texts {
        return Err(Error::BadRequest(format!(
            "{count} texts; this endpoint takes at most {} per request",
            limits.max_texts
        )));
    }
    if !settings.batch && count != 1 {
        return Err(Error::BadRequest(format!(
            "this model takes one text per request, and the body holds {count}"
        )));
    }
    if bytes > limits.max_text_bytes {
        let what = if count == 1 {
            "the text is"
        } else {
            "the texts are"
        };
        return Err(Error::BadRequest(format!(
            "{what} {bytes} bytes long; this endpoint takes at most {} bytes of text per request",
            limits.max_text_bytes
        )));
    }
    Ok(())
}

/// The tensors of `encodings`, one row each, already padded to one length.
fn rows(settings: &Encode, encodings: Vec<tokenizers::Encoding>) -> Result<Encoded, Error> {
    let count = encodings.len();
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
                which(count, index),
                encoding.len(),
                settings.max_length
            )));
        }
        // Padding brings every row to one length; a row of another would be a tokenizer bug.
        if encoding.len() != length {
            return Err(Error::BadRequest(format!(
                "{} is {} tokens after padding, and the first {length}",
                which(count, index),
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
    Ok(encoded)
}

/// [`encode_within`] for a request whose texts may come in pairs, or that sets its own
/// `truncation` or `max_length` ([`Parameters`]): each row made as `tokenizers` makes it under
/// those parameters (the pair's template, `truncate_encodings`' strategies), within the
/// settings (a request's `max_length` at most the settings', the rows padded as they say).
/// A request with neither is [`encode_within`]'s.
///
/// Each text is tokenized whole ([`whole`]), the strategy decides from the full lengths as
/// `tokenizers` does, and what it cuts is dropped before the pair is joined: joining two
/// truncated texts in `tokenizers` pairs every overflowing piece of one with every piece of the
/// other, quadratic in the texts' length (125 rows kept for a 14- and a 9-token text at 5).
pub fn encode_request_within(
    tokenizer: &Tokenizer,
    inputs: &[Input],
    parameters: &Parameters,
    limits: &Limits,
    out_of_time: &dyn Fn() -> bool,
) -> Result<Option<Encoded>, Error> {
    if parameters.is_empty() && inputs.iter().all(|input| input.pair.is_none()) {
        let texts: Vec<&str> = inputs.iter().map(|input| input.text.as_str()).collect();
        return encode_within(tokenizer, &texts, limits, out_of_time);
    }
    let settings = tokenizer.settings();
    admit(
        settings,
        limits,
        inputs.len(),
        inputs.iter().map(Input::bytes).sum(),
    )?;
    let max_length = match parameters.max_length {
        Some(asked) if asked > settings.max_length => {
            return Err(Error::BadRequest(format!(
                "parameters.max_length = {asked}: this endpoint's rows are at most {} tokens (the \
                 model's length, the plugin's max_length)",
                settings.max_length
            )));
        }
        Some(asked) => asked,
        None => settings.max_length,
    };
    // A request's max_length alone is cut as the settings say (transformers 5 would ignore it
    // without `truncation`, and leave the row longer than the request asked).
    let strategy = parameters.truncation.unwrap_or(if settings.truncation {
        Truncation::LongestFirst
    } else {
        Truncation::Refuse
    });
    let inner = &tokenizer.inner;
    let mut encodings = Vec::with_capacity(inputs.len());
    for (index, input) in inputs.iter().enumerate() {
        if out_of_time() {
            return Ok(None);
        }
        let what = which(inputs.len(), index);
        let mut first = whole(inner, &input.text, 0)?;
        let second = input
            .pair
            .as_deref()
            .map(|pair| whole(inner, pair, 1))
            .transpose()?;
        let added = match inner.get_post_processor() {
            Some(processor) if settings.add_special_tokens => {
                processor.added_tokens(second.is_some())
            }
            _ => 0,
        };
        let room = max_length.checked_sub(added).ok_or_else(|| {
            Error::BadRequest(format!(
                "max_length = {max_length} is shorter than {what}'s special tokens: the \
                 tokenizer adds {added} to it"
            ))
        })?;
        let lengths = (first.len(), second.as_ref().map(tokenizers::Encoding::len));
        let (keep_first, keep_second) = kept(strategy, lengths, room).map_err(|why| match why {
            Kept::TooLong(total) => Error::BadRequest(format!(
                "{what} is {} tokens long; this model takes at most {max_length} (and \
                     truncation is off: the request's `truncation`, else the plugin's)",
                total + added
            )),
            Kept::Cannot(why) => Error::BadRequest(format!("{what}: {why}")),
        })?;
        first.truncate(keep_first, 0, tokenizer.truncation_direction);
        first.take_overflowing();
        let second = second.map(|mut encoding| {
            encoding.truncate(keep_second, 0, tokenizer.truncation_direction);
            encoding.take_overflowing();
            encoding
        });
        let cannot = |error: tokenizers::Error| {
            Error::BadRequest(format!("{what} cannot be tokenized: {error}"))
        };
        let row = match inner.get_post_processor() {
            Some(processor) => processor
                .process(first, second, settings.add_special_tokens)
                .map_err(cannot)?,
            None => {
                let encodings = std::iter::once(first).chain(second).collect();
                <dyn PostProcessor>::default_process(encodings, settings.add_special_tokens)
                    .map_err(cannot)?
                    .pop()
                    .ok_or_else(|| Error::BadRequest(format!("{what} made no row")))?
            }
        };
        encodings.push(row);
    }
    if let Some(padding) = inner.get_padding() {
        tokenizers::utils::padding::pad_encodings(&mut encodings, padding)
            .map_err(|error| Error::BadRequest(format!("the texts cannot be padded: {error}")))?;
    }
    rows(settings, encodings).map(Some)
}

/// One text as `tokenizers`' `encode_fast` makes it: [`tokenized`] within the truncation's
/// length (as `do_tokenize` limits a first text, unless only the second is cut, and as
/// `tokenizers` 0.23.2's model stops there), then truncation, special tokens and padding.
fn single(
    inner: &tokenizers::Tokenizer,
    text: &str,
    add_special_tokens: bool,
) -> tokenizers::Result<tokenizers::Encoding> {
    let limit = inner
        .get_truncation()
        .filter(|params| params.strategy != TruncationStrategy::OnlySecond)
        .map(|params| (params.max_length, params.direction));
    let encoding = tokenized(inner, text, 0, limit)?;
    inner.post_process(encoding, None, add_special_tokens)
}

/// `text` tokenized whole, as `tokenizers` tokenizes one text of a pair before its
/// post-processor; `type_id` its segment. Whole, with no truncation: `tokenizers` 0.23.2 stops
/// tokenizing a text at its truncation length, which leaves a pair's strategy (decided on the
/// texts' full lengths in 0.23.3 and in Python's `tokenizers`) without them. The text is
/// bounded by `max_text_bytes`.
fn whole(
    inner: &tokenizers::Tokenizer,
    text: &str,
    type_id: u32,
) -> Result<tokenizers::Encoding, Error> {
    tokenized(inner, text, type_id, None)
        .map_err(|error| Error::BadRequest(format!("the text cannot be tokenized: {error}")))
}

/// `text` as `tokenizers`' `encode_single_sequence` tokenizes it, before any post-processing:
/// added tokens, normalizer and pre-tokenizer (run by [`Normalize`] and [`PreTokenize`]), the
/// model (stopping at `limit` tokens, if any); `type_id` its segment.
fn tokenized(
    inner: &tokenizers::Tokenizer,
    text: &str,
    type_id: u32,
    limit: Option<(usize, tokenizers::TruncationDirection)>,
) -> tokenizers::Result<tokenizers::Encoding> {
    let normalizer = inner.get_normalizer().map(Normalize);
    let mut pretokenized = inner
        .get_added_vocabulary()
        .extract_and_normalize(normalizer.as_ref(), text);
    if let Some(pre_tokenizer) = inner.get_pre_tokenizer() {
        PreTokenize(pre_tokenizer).pre_tokenize(&mut pretokenized)?;
    }
    inner
        .get_model()
        .tokenize_in_pretokenized(&mut pretokenized, limit)?;
    pretokenized.into_encoding(None, type_id, OffsetType::None)
}

/// Why a row cannot be brought to its length.
#[derive(Debug, PartialEq, Eq)]
enum Kept {
    /// It is longer (this many tokens, special tokens left out) and the request refuses to cut.
    TooLong(usize),
    /// The strategy cannot cut it (what `tokenizers` raises).
    Cannot(&'static str),
}

/// How many tokens of each text a row keeps, from their full `lengths` (the second: a pair's),
/// for `room` tokens, as `tokenizers`' `truncate_encodings` decides under `strategy`.
fn kept(
    strategy: Truncation,
    (first, second): (usize, Option<usize>),
    room: usize,
) -> Result<(usize, usize), Kept> {
    let total = first + second.unwrap_or(0);
    if total <= room {
        return Ok((first, second.unwrap_or(0)));
    }
    let remove = total - room;
    if room == 0 && strategy != Truncation::Refuse {
        // `tokenizers` empties both texts whatever the strategy.
        return Ok((0, 0));
    }
    match (strategy, second) {
        (Truncation::Refuse, _) => Err(Kept::TooLong(total)),
        (Truncation::LongestFirst | Truncation::OnlyFirst, None) => Ok((room, 0)),
        (Truncation::OnlySecond, None) => {
            Err(Kept::Cannot("truncation = only_second needs a text_pair"))
        }
        (Truncation::OnlyFirst, Some(second)) => match first > remove {
            true => Ok((first - remove, second)),
            false => Err(Kept::Cannot(
                "its text is too short to make room by truncating it only (only_first)",
            )),
        },
        (Truncation::OnlySecond, Some(second)) => match second > remove {
            true => Ok((first, second - remove)),
            false => Err(Kept::Cannot(
                "its text_pair is too short to make room by truncating it only (only_second)",
            )),
        },
        (Truncation::LongestFirst, Some(second)) => {
            // `tokenizers`' arithmetic, with the shorter text first.
            let (mut short, mut long) = (first.min(second), first.max(second));
            long = if short > room {
                short
            } else {
                long.min(short.max(room - short))
            };
            if short + long > room {
                short = room / 2;
                long = short + room % 2;
            }
            Ok(if first > second {
                (long, short)
            } else {
                (short, long)
            })
        }
    }
}

/// How errors name the text at `index` of `count`.
fn which(count: usize, index: usize) -> String {
    if count == 1 {
        "the text".to_owned()
    } else {
        format!("text {}", index + 1)
    }
}

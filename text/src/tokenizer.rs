//! A Hugging Face `tokenizer.json`, loaded and checked once, and configured for how its texts
//! become tensors ([`Encode`]): the file's own truncation and padding sections give way to the
//! plugin's settings (keeping the file's padding direction, token and type id where it has
//! them), so a model gets the length its configuration says whatever the file was saved with.
//! A file whose pipeline is too long, or whose regular expressions could match in unbounded
//! time, is refused before it is built ([`crate::pipeline`]).

use tokenizers::{
    PaddingDirection, PaddingParams, PaddingStrategy, PostProcessor, TruncationDirection,
    TruncationParams,
};

use crate::settings::{Datatype, Encode, Padding};

/// Tokens tried, in order, as the padding token of a file that names none.
const PAD_TOKENS: [&str; 4] = ["[PAD]", "<pad>", "<|endoftext|>", "</s>"];

/// A tokenizer ready to encode and decode.
pub struct Tokenizer {
    pub(crate) inner: tokenizers::Tokenizer,
    pub(crate) encode: Encode,
    /// The end texts are cut from: the file's truncation direction, else the right.
    pub(crate) truncation_direction: TruncationDirection,
    vocabulary: usize,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocabulary", &self.vocabulary)
            .field("encode", &self.encode)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// The tokenizer `json` (a `tokenizer.json`'s bytes) describes, configured for `encode`;
    /// an error says what is wrong with the file or with the settings for it.
    pub fn from_json(json: &[u8], encode: &Encode) -> Result<Tokenizer, String> {
        let json = crate::scores::as_tokenizers_reads_them(json);
        let file: serde_json::Value = serde_json::from_slice(&json)
            .map_err(|error| format!("not a tokenizer.json this can read: {error}"))?;
        crate::pipeline::check(&file)?;
        let mut inner = tokenizers::Tokenizer::from_bytes(&json)
            .map_err(|error| format!("not a tokenizer.json this can read: {error}"))?;
        let vocabulary = inner.get_vocab_size(true);
        if vocabulary == 0 {
            return Err("the tokenizer has no tokens".into());
        }
        let largest = u64::try_from(vocabulary - 1).unwrap_or(u64::MAX);
        if encode.datatype == Datatype::Int32 && largest > i32::MAX as u64 {
            return Err(format!(
                "the tokenizer has {vocabulary} tokens, more than INT32 ids can number"
            ));
        }
        let added = match inner.get_post_processor() {
            Some(processor) if encode.add_special_tokens => processor.added_tokens(false),
            _ => 0,
        };
        if added >= encode.max_length {
            return Err(format!(
                "max_length = {}: the tokenizer adds {added} special tokens to every text, which \
                 leaves no room for the text",
                encode.max_length
            ));
        }
        let file_padding = inner.get_padding().cloned();
        let (pad_token, pad_id) = pad_token(&inner, encode, file_padding.as_ref())?;
        let truncation_direction = inner
            .get_truncation()
            .map_or(TruncationDirection::Right, |t| t.direction);
        let truncation = encode.truncation.then(|| TruncationParams {
            max_length: encode.max_length,
            direction: truncation_direction,
            ..TruncationParams::default()
        });
        inner.with_truncation(truncation).map_err(|error| {
            format!(
                "max_length = {}: the tokenizer cannot truncate to it ({error})",
                encode.max_length
            )
        })?;
        inner.with_padding(Some(PaddingParams {
            strategy: match encode.padding {
                Padding::MaxLength => PaddingStrategy::Fixed(encode.max_length),
                Padding::Longest => PaddingStrategy::BatchLongest,
            },
            direction: file_padding
                .as_ref()
                .map_or(PaddingDirection::Right, |p| p.direction),
            pad_to_multiple_of: None,
            pad_id,
            pad_type_id: file_padding.as_ref().map_or(0, |p| p.pad_type_id),
            pad_token,
        }));
        Ok(Tokenizer {
            inner,
            encode: encode.clone(),
            truncation_direction,
            vocabulary,
        })
    }

    /// How many ids the tokenizer has (its model's and its added tokens).
    pub fn vocabulary(&self) -> usize {
        self.vocabulary
    }

    /// The settings it encodes with.
    pub fn settings(&self) -> &Encode {
        &self.encode
    }

    /// The `tokenizers` tokenizer underneath (for tools and tests).
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}

/// The padding token and its id: the setting's, else the file's, else the first of
/// [`PAD_TOKENS`] the vocabulary has, else `<id 0>`.
fn pad_token(
    inner: &tokenizers::Tokenizer,
    encode: &Encode,
    file: Option<&PaddingParams>,
) -> Result<(String, u32), String> {
    if let Some(token) = &encode.pad_token {
        let id = inner
            .token_to_id(token)
            .ok_or_else(|| format!("pad_token = '{token}': the tokenizer has no such token"))?;
        return Ok((token.clone(), id));
    }
    if let Some(file) = file {
        return Ok((file.pad_token.clone(), file.pad_id));
    }
    Ok(PAD_TOKENS
        .iter()
        .find_map(|token| Some(((*token).to_owned(), inner.token_to_id(token)?)))
        .unwrap_or_else(|| ("<id 0>".to_owned(), 0)))
}
